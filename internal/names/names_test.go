package names_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// The kustomize components name the same objects as the Go code.
func TestTheComponentsNameTheSameObjects(t *testing.T) {
	root := testenv.Checkout(t)
	read := func(rel string) string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	release := read("kustomize-components/cluster-init/base/helmrelease.yaml")
	for _, n := range []string{names.ValuesConfigMap, names.OverridesConfigMap, names.SecretsSecret, names.SourceConfigMap, names.StateConfigMap} {
		if !strings.Contains(release, "name: "+n+"\n") {
			t.Errorf("the cluster-init HelmRelease does not read %s", n)
		}
	}
	rbac := read("kustomize-components/management-configs/rbac.yaml")
	required, optional := names.CopiedSecrets()
	for _, n := range append(append(names.CopiedConfigMaps(), required...), optional...) {
		if !strings.Contains(rbac, n) {
			t.Errorf("the management-configs Job may not read %s", n)
		}
	}
	values := read("charts/cluster-init/values.yaml")
	if !strings.Contains(values, "name: "+names.AgeKeySecret+"\n") {
		t.Errorf("the chart's units do not name %s", names.AgeKeySecret)
	}
	// The units' releases read the credentials the release checked, never the environment's Secret.
	if strings.Contains(values, "name: "+names.SecretsSecret+"\n") ||
		!strings.Contains(values, "name: '{{ .Release.Name }}-credentials'\n          valuesKey: "+names.CredentialsKey+"\n") ||
		names.CredentialsSecret != names.Release+"-credentials" {
		t.Error("a unit's release reads other credentials than the release's checked ones")
	}
	if !strings.Contains(read("charts/cluster-init/templates/credentials.yaml"), `name: {{ printf "%s-credentials" $.Release.Name | quote }}`) {
		t.Error("the checked credentials' Secret is named otherwise")
	}
	tenants := read("charts/workload-clusters/templates/tenants.yaml")
	if !strings.Contains(tenants, names.TenantLabel+`: "true"`) || !strings.Contains(tenants, "name: "+names.TenantKustomization+"\n") {
		t.Error("the tenants' namespaces or Kustomizations are named otherwise")
	}
	// The Receiver of the platform's repository selects the tenants' views of it by this label.
	if !strings.Contains(tenants, names.RepositoryLabel+`: {{ ternary "`+names.TenantRepository+`" "`+names.PlatformRepository+`" `) ||
		!strings.Contains(read("charts/cluster-init/templates/notifications.yaml"), names.RepositoryLabel+": "+names.PlatformRepository+"\n") {
		t.Error("the tenants' GitRepositories of the platform's repository are labelled otherwise than the Receiver selects them")
	}
	if !strings.Contains(read("charts/workload-clusters/templates/_helpers.tpl"), `define "workload-clusters.platformConfigMap" -}}`+names.TenantPlatformConfigMap+"{{") {
		t.Error("the tenants' platform ConfigMap is named otherwise")
	}
	helpers := read("charts/workload-clusters/templates/_helpers.tpl")
	if !strings.Contains(helpers, `define "workload-clusters.paramsConfigMap" -}}`+names.TenantParamsConfigMap+"{{") ||
		!strings.Contains(helpers, `define "workload-clusters.builder" -}}`+names.TenantBuilder+"{{") ||
		!strings.Contains(tenants, "name: "+names.TenantAccount+"\n") {
		t.Error("the tenants' parameters or accounts are named otherwise")
	}
	if !strings.Contains(helpers, `define "workload-clusters.readersKubeconfigsRole" -}}`+names.TenantReadersKubeconfigsRole+"{{") {
		t.Error("the Role of the tenants' people's kubeconfigs is named otherwise")
	}
	if !strings.Contains(helpers, `define "workload-clusters.cloudCredentialsSecret" -}}`+names.TenantCloudCredentialsSecret+"{{") {
		t.Error("the tenants' cloud credentials Secret is named otherwise")
	}
	if !strings.Contains(helpers, `define "workload-clusters.checkedSource" -}}`+names.TenantCheckedSource+"{{") ||
		!strings.Contains(helpers, `define "workload-clusters.sourceName" -}}{{- printf "tenant-%s" . -}}{{- end -}}`) || names.TenantSourceOf("x") != "tenant-x" {
		t.Error("the tenants' sources are named otherwise")
	}
	if !strings.Contains(read("charts/cluster-init/templates/release.yaml"), `name: {{ printf "%s-units" .Release.Name | quote }}`) ||
		names.UnitsConfigMapOf(names.Release) != names.UnitsConfigMap {
		t.Error("the unit graph's ConfigMap is named otherwise")
	}
}
