package bootstrap

import (
	"time"

	"cluster-init.dev/cluster-init/internal/environment"
	"cluster-init.dev/cluster-init/internal/progress"
	"cluster-init.dev/cluster-init/internal/redact"
	"cluster-init.dev/cluster-init/internal/standalone"
	"cluster-init.dev/cluster-init/internal/statedir"
	"cluster-init.dev/cluster-init/internal/values"
)

// Common is what every verb of this package takes: the checkout and the environment, where state
// lives, how long to try and where to report.
type Common struct {
	// RepoRoot is the checkout; empty for Manage, which reads only the standalone state.
	RepoRoot string
	Env      *environment.Environment
	// Redactor hides the environment's secrets in the diagnostics bundle (the printer writes
	// through it already).
	Redactor *redact.Redactor
	// Overrides are extra values files (--values), after the environment values.
	Overrides   []values.Layer
	KubeVersion string
	// BuildCache, if set, keeps unit builds across commands.
	BuildCache string
	// StateDir keeps the kind clusters' files, the management kubeconfigs, the standalone states
	// and the diagnostics.
	StateDir statedir.Dir
	// Timeout bounds the whole run.
	Timeout time.Duration
	// Timeline, when set, is an HTML (or .svg) file the run's timeline is written to.
	Timeline string
	Out      progress.Printer
}

// CreateOptions are the options of Run (`bootstrap ENV`).
type CreateOptions struct {
	Common
	// Kubeconfig and Context, when Kubeconfig is set, are an existing cluster to create the
	// environment's cluster from instead of kind: it keeps managing it (no pivot).
	Kubeconfig, Context string
	// Source is oci (push the checkout next to kind) or git (the checkout's commit).
	Source string
	// Until, when set, stops the run after the phase of that name.
	Until string
	// KeepBootstrap keeps the bootstrap cluster after a successful pivot.
	KeepBootstrap bool
}

// StandaloneOptions are the options of Standalone (`bootstrap ENV --standalone`): always from a
// kind cluster of its own, which is deleted afterwards.
type StandaloneOptions struct {
	Common
	Source, Until string
	// KeepBootstrap keeps the bootstrap cluster after the export (a later run deletes it).
	KeepBootstrap bool
	// Key encrypts the secrets of the state; Versions are the checkout's pins, recorded in it.
	Key      *standalone.Key
	Versions map[string]string
}

// AdoptOptions are the options of Adopt (`bootstrap ENV --adopt --kubeconfig FILE`).
type AdoptOptions struct {
	Common
	// Kubeconfig and Context are the cluster to adopt.
	Kubeconfig, Context string
	Source, Until       string
	// TakeOver lets Adopt own the Flux, cert-manager or Cluster API another tool installed.
	TakeOver bool
}

// TakeBackOptions are the options of TakeBack (`bootstrap cleanup ENV` of a self-managed cluster
// whose machines are not containers of this host).
type TakeBackOptions struct {
	Common
	Source string
}

// ApplyOptions are the options of Apply (`bootstrap apply ENV`, day 2).
type ApplyOptions struct {
	Common
	// Kubeconfig and Context are the management cluster; empty, the kubeconfig the bootstrap
	// wrote to the state directory.
	Kubeconfig, Context string
	Source              string
	// NoBackup applies the change without the backup that is taken before it where the
	// management cluster runs the backup unit.
	NoBackup bool
}

// ManageOptions are the options of Manage (`bootstrap scale|upgrade|delete ENV` of a standalone
// cluster).
type ManageOptions struct {
	Common
	// Key decrypts the secrets of the state.
	Key    *standalone.Key
	Change standalone.Change
}
