// Package names holds the names of the objects cluster-init keeps in a cluster: the namespace of
// its release, the ConfigMaps and Secrets of the values layers, the unit graph, the pivot's
// record, and the labels they carry. The kustomize components and the chart name the same objects
// (a test checks that they agree); Go code uses these constants, never a literal.
package names

const (
	// Namespace is the namespace of the cluster-init release, its units and the cluster definitions.
	Namespace = "cluster-init"
	// Release is the umbrella HelmRelease.
	Release = "cluster-init"
	// SourceRepository is the Flux source of the release and of every unit of the checkout.
	SourceRepository = "cluster-init"

	// The values layers of the release (valuesFrom of kustomize-components/cluster-init/base).
	ValuesConfigMap    = "cluster-init-values"
	ValuesKey          = "values.yaml"
	SecretsSecret      = "cluster-init-secrets"
	SecretsKey         = "secrets.yaml"
	OverridesConfigMap = "cluster-init-overrides"
	SourceConfigMap    = "cluster-init-source"
	// CredentialsSecret holds the credentials the release checked, which its units' charts read
	// (key CredentialsKey): never the environment's Secret, which a commit changes unchecked.
	// Another release names it after itself (<release>-credentials).
	CredentialsSecret = Release + "-credentials"
	CredentialsKey    = "values.yaml"
	// StateConfigMap holds the state of a management cluster (self_managed), written by the pivot.
	StateConfigMap = "cluster-init-state"

	// UnitsConfigMap is the unit graph the chart renders for the cluster-init release
	// (UnitsConfigMapOf for any release).
	UnitsConfigMap = Release + "-units"

	// PivotRecord is the pivot's record of its steps; PivotKubeconfig is its copy of the
	// management cluster's kubeconfig (the Cluster API Secret moves with the cluster).
	PivotRecord     = "cluster-init-pivot"
	PivotKubeconfig = "cluster-init-pivot-kubeconfig"

	// The backups (values backup, charts/cluster-init/templates/backup.yaml and the unit
	// BackupUnit): the configuration the chart renders for the Job (key BackupConfigKey), the
	// store's keys, the CronJob, and the Job's record of its runs.
	BackupUnit            = "backup"
	BackupConfigMap       = "cluster-init-backup"
	BackupConfigKey       = "config.json"
	BackupStoreSecret     = "cluster-init-backup-store"
	BackupCronJob         = "backup"
	BackupStatusConfigMap = "cluster-init-backup-status"
	// BackupLock is the Lease a backup run holds: one at a time.
	BackupLock = "cluster-init-backup"
	// IncomingSourceRepository follows the platform's repository as SourceRepository did before
	// the change gate (internal/changegate): SourceRepository is then pinned to the commit the gate
	// released (managementstate.State.ReleasedCommit), each new one after a backup before it.
	// ChangeGate is the gate's Deployment and account; ReleaseWithoutBackupAnnotation, set on
	// IncomingSourceRepository to a held commit, releases that commit without a backup.
	IncomingSourceRepository       = "cluster-init-incoming"
	ChangeGate                     = "change-gate"
	ReleaseWithoutBackupAnnotation = "cluster-init.dev/release-without-backup"
	// RestoreRecord is the record of a restore's steps in the management cluster it restores
	// into (`bootstrap restore`): a restore run again continues from it.
	RestoreRecord = "cluster-init-restore"

	// AgeKeySecret holds the age key kustomize-controller decrypts the environment's secrets with
	// (key secrets.KeySecretKey); GitAuthSecret the credentials of the git source.
	AgeKeySecret  = "cluster-init-sops-age"
	GitAuthSecret = "cluster-init-git-auth"

	// FieldManager is the server-side apply field manager of everything cluster-init applies.
	FieldManager = "cluster-init"
)

// Labels and annotations.
const (
	// TenantLabel marks the namespaces of the tenants of workload clusters; TenantKustomization
	// is the Kustomization there that applies the tenant's directory (charts/workload-clusters).
	TenantLabel         = "cluster-init.dev/tenant"
	TenantKustomization = "workload-clusters"
	// TenantCheckedSource is the ExternalArtifact, in a tenant's namespace, of its directory as the
	// platform's gate checked it (internal/tenantsources): what TenantKustomization reads.
	TenantCheckedSource = "workload-clusters"
	// ApplicationsKustomization applies the Applications committed under clusters/<name>/apps
	// (kustomize-components/applications).
	ApplicationsKustomization = "applications-from-git"
	// TenantPlatformConfigMap holds, in a tenant's namespace, the values its workload clusters
	// share with the management cluster.
	TenantPlatformConfigMap = "workload-cluster-platform"
	// TenantParamsConfigMap holds, in a tenant's namespace, its parameters of the admission
	// policies (limits, name prefix, versions); TenantAccount is the ServiceAccount its directory
	// is applied as, TenantBuilder the one its clusters are built as.
	TenantParamsConfigMap = "cluster-init-tenant"
	TenantAccount         = "tenant"
	TenantBuilder         = "cluster-builder"
	// TenantReadersKubeconfigsRole lets, in a tenant's namespace, the tenant's people get the
	// kubeconfigs of its clusters and no other Secret: the chart makes it, the placement
	// controller keeps its rules (internal/kubeconfigreaders).
	TenantReadersKubeconfigsRole = "tenant-readers-kubeconfigs"
	// TenantCloudCredentialsSecret holds, in a tenant's namespace on OpenStack, the credentials
	// its clusters are built with (their identityRef), which the tenant never reads.
	TenantCloudCredentialsSecret = "cluster-init.openstack"
	// RepositoryLabel says whose repository a tenant's GitRepository reads (the value of
	// TenantLabel names the tenant): TenantRepository, its own, or PlatformRepository, the
	// platform's, which the management cluster's Receiver selects (a push to the platform's
	// repository fetches these too).
	RepositoryLabel    = "cluster-init.dev/repository"
	TenantRepository   = "tenant"
	PlatformRepository = "platform"

	// ShardLabel gives a Flux object to a tenants' shard (kustomize-components/flux-shard): the
	// platform's controllers ignore what carries it. FluxNamespace is where the shards run.
	ShardLabel    = "sharding.fluxcd.io/key"
	FluxNamespace = "flux-system"

	PartOfLabel = "app.kubernetes.io/part-of"
	PartOf      = "cluster-init"
	// WatchLabel makes helm-controller upgrade a release when a valuesFrom object changes.
	WatchLabel = "reconcile.fluxcd.io/watch"
	// UnitAnnotation and OriginAnnotation are set on every rendered object.
	UnitAnnotation   = "cluster-init.dev/unit"
	OriginAnnotation = "cluster-init.dev/rendered-from"
	// MovedAtAnnotation is set by the pivot on moved objects whose controller must be woken.
	MovedAtAnnotation = "cluster-init.dev/moved-at"
)

// TenantSourceOf is the GitRepository, in the platform's namespace, of a tenant's directory.
func TenantSourceOf(tenant string) string { return "tenant-" + tenant }

// UnitsConfigMapOf is the ConfigMap of a release's unit graph.
func UnitsConfigMapOf(release string) string { return release + "-units" }

// Labels are the labels of an object cluster-init owns; watched ones are values layers of the
// release.
func Labels(watched bool) map[string]string {
	l := map[string]string{PartOfLabel: PartOf}
	if watched {
		l[WatchLabel] = "Enabled"
	}
	return l
}

// CopiedConfigMaps and CopiedSecrets are the values layers the management-configs Job copies
// from the bootstrap cluster into the management cluster.
func CopiedConfigMaps() []string {
	return []string{ValuesConfigMap, OverridesConfigMap, SourceConfigMap}
}

// CopiedSecrets: see CopiedConfigMaps. The Secrets of a git source exist only with one.
func CopiedSecrets() (required, optional []string) {
	return []string{SecretsSecret}, []string{GitAuthSecret, AgeKeySecret}
}
