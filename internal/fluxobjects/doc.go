// Package fluxobjects owns the operations this project performs on Flux's objects, one file per
// verb as fluxcd/pkg/ssa has them: suspend (suspend.go), request a reconciliation
// (reconcile.go), list a namespace's Kustomizations and HelmReleases (list.go). Reading whether
// one is ready is internal/readiness's.
package fluxobjects
