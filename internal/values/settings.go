package values

import (
	"encoding/json"
	"fmt"

	"cluster-init.dev/cluster-init/internal/registrymirror"
)

// Settings is the typed view of merged values that the Go code reads. The chart's values.yaml and
// values.schema.json define every key; this is the part the CLI, the pivot and cleanup use.
// Decode it once per rendered release and pass the fields on.
type Settings struct {
	Context     string `json:"context"`
	SelfManaged bool   `json:"self_managed"`
	// Adopted: the management cluster existed before cluster-init (bootstrap --adopt).
	Adopted bool `json:"adopted"`

	Cluster          ClusterSettings          `json:"cluster"`
	BootstrapCluster BootstrapClusterSettings `json:"bootstrap_cluster"`
	RegistryMirrors  RegistryMirrors          `json:"registry_mirrors"`
	Source           SourceSettings           `json:"source"`
	ClusterInitImage string                   `json:"cluster_init_image"`
	Applications     ApplicationsSettings     `json:"applications"`
	Backup           BackupSettings           `json:"backup"`
	// Credentials holds only the secrets the CLI itself uses (the environment's secrets.yaml).
	Credentials struct {
		Backup BackupCredentials `json:"backup"`
	} `json:"credentials"`
}

// BackupSettings are the management cluster's backups (`backup`). The backup Job reads the same
// shape, rendered by the chart (internal/backupjob.Config).
type BackupSettings struct {
	Enabled bool `json:"enabled"`
	// BeforeChange: the change gate holds each commit until a backup before it (internal/changegate).
	BeforeChange bool     `json:"before_change"`
	Schedule     string   `json:"schedule"`
	Recipients   []string `json:"recipients"`
	Store        struct {
		Endpoint string `json:"endpoint"`
		Bucket   string `json:"bucket"`
		Region   string `json:"region"`
		CA       string `json:"ca"`
	} `json:"store"`
	Retention struct {
		Keep        int `json:"keep"`
		MaxAgeHours int `json:"max_age_hours"`
	} `json:"retention"`
}

// BackupCredentials are the object store's keys (`credentials.backup`).
type BackupCredentials struct {
	AccessKey string `json:"access_key"`
	SecretKey string `json:"secret_key"`
}

// ApplicationsSettings are where the Applications may run (`applications`).
type ApplicationsSettings struct {
	OnManagement       bool     `json:"on_management"`
	SelectorNamespaces []string `json:"selector_namespaces"`
}

// ClusterSettings is the cluster the release defines (`cluster`).
type ClusterSettings struct {
	Name      string `json:"name"`
	Providers struct {
		Bootstrap      string `json:"bootstrap"`
		Infrastructure string `json:"infrastructure"`
	} `json:"providers"`
	KubernetesVersion string `json:"kubernetes_version"`
	RKE2AirGapped     struct {
		Enabled bool `json:"enabled"`
	} `json:"rke2_air_gapped"`
	Network struct {
		PodsCIDR     string `json:"pods_cidr"`
		ServicesCIDR string `json:"services_cidr"`
	} `json:"network"`
	ControlPlane struct {
		Replicas int `json:"replicas"`
	} `json:"control_plane"`
	Workers struct {
		Replicas int `json:"replicas"`
	} `json:"workers"`
	CAPD struct {
		NodeImage string `json:"node_image"`
	} `json:"capd"`
	CNI struct {
		FlannelBackend string `json:"flannel_backend"`
	} `json:"cni"`
}

// CAPDNodeImage is the kind node image of the cluster's CAPD machines: cluster.capd.node_image,
// or the one of cluster.kubernetes_version. The chart's capi-cluster.nodeImage is the same rule.
func (c ClusterSettings) CAPDNodeImage() string {
	if c.CAPD.NodeImage != "" {
		return c.CAPD.NodeImage
	}
	return "kindest/node:" + c.KubernetesVersion
}

// OnDocker tells whether the cluster's machines are containers of the host's Docker engine.
func (c ClusterSettings) OnDocker() bool { return c.Providers.Infrastructure == "capd" }

// BootstrapClusterSettings is the kind bootstrap cluster (`bootstrap_cluster`).
type BootstrapClusterSettings struct {
	Name         string `json:"name"`
	NodeImage    string `json:"node_image"`
	PodsCIDR     string `json:"pods_cidr"`
	ServicesCIDR string `json:"services_cidr"`
	Registry     struct {
		Name     string `json:"name"`
		Image    string `json:"image"`
		HostPort int    `json:"host_port"`
	} `json:"registry"`
}

// RegistryMirrors are the containerd mirrors of every cluster (`registry_mirrors`).
type RegistryMirrors struct {
	HostsConfig registrymirror.Config `json:"hosts_config"`
}

// SourceSettings is what the clusters reconcile from (`source`).
type SourceSettings struct {
	Type string            `json:"type"`
	URL  string            `json:"url"`
	Ref  map[string]string `json:"ref"`
}

// Decode reads the typed view of merged values. Keys it does not know are left to the chart.
func Decode(merged map[string]any) (Settings, error) {
	var s Settings
	data, err := json.Marshal(merged)
	if err != nil {
		return s, fmt.Errorf("values: %w", err)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("values: %w", err)
	}
	return s, nil
}
