{{/*
capi-cluster.checks fails early, naming the values key, on what the templates cannot render.
*/}}
{{- define "capi-cluster.checks" -}}
{{- $p := .Values.cluster.providers -}}
{{- if not (has $p.bootstrap (list "kubeadm" "rke2")) -}}
  {{- fail (printf "cluster.providers.bootstrap: unknown provider %q, expected kubeadm or rke2" $p.bootstrap) -}}
{{- end -}}
{{- if not (has $p.infrastructure (list "capd" "capo" "in-memory")) -}}
  {{- fail (printf "cluster.providers.infrastructure: unknown provider %q, expected capd, capo or in-memory" $p.infrastructure) -}}
{{- end -}}
{{- if and (eq $p.infrastructure "in-memory") (ne $p.bootstrap "kubeadm") -}}
  {{- fail (printf "cluster.providers.bootstrap: %s with the in-memory infrastructure, expected kubeadm (the only control plane it simulates)" $p.bootstrap) -}}
{{- end -}}
{{- if and (eq $p.infrastructure "capo") (not .Values.cluster.capo.credentials_secret) (not (dig "openstack" "clouds_yaml" "" (.Values.credentials | default dict))) -}}
  {{- fail "credentials.openstack.clouds_yaml: required with the capo provider (in secrets.yaml)" -}}
{{- end -}}
{{- /* More than one control plane machine on OpenStack needs the API behind a load balancer; a
     running cluster made before, with its endpoint on the first machine, keeps it (its endpoint
     cannot move: capi-cluster.loadBalancerKept). */ -}}
{{- $runningWithoutLB := false -}}
{{- if eq $p.infrastructure "capo" -}}
  {{- $running := lookup "infrastructure.cluster.x-k8s.io/v1beta1" "OpenStackCluster" .Release.Namespace .Values.cluster.name -}}
  {{- $runningWithoutLB = and $running (not (dig "spec" "apiServerLoadBalancer" "enabled" false $running)) -}}
{{- end -}}
{{- if and (eq $p.infrastructure "capo") (gt (int .Values.cluster.control_plane.replicas) 1) (not (dig "api_server_load_balancer" "enabled" false .Values.cluster.capo)) (not $runningWithoutLB) -}}
  {{- fail (printf "cluster.control_plane.replicas: %d control plane machines on capo need cluster.capo.api_server_load_balancer.enabled: true (an Octavia load balancer in front of them): without it the cluster's endpoint is a floating IP on the first machine, and the cluster stops with it" (int .Values.cluster.control_plane.replicas)) -}}
{{- end -}}
{{- include "capi-cluster.versionSteps" . -}}
{{- include "capi-cluster.loadBalancerKept" . -}}
{{- end -}}

{{/*
capi-cluster.loadBalancerKept fails when a commit switches a running OpenStack cluster's API
load balancer on or off: its endpoint (the floating IP of the load balancer, or of the first
control plane machine) was fixed when it was created, and CAPO cannot move it. Offline, lookup
finds nothing and there is nothing to compare.
*/}}
{{- define "capi-cluster.loadBalancerKept" -}}
{{- $c := .Values.cluster -}}
{{- if eq $c.providers.infrastructure "capo" -}}
{{- $running := lookup "infrastructure.cluster.x-k8s.io/v1beta1" "OpenStackCluster" .Release.Namespace $c.name -}}
{{- if $running -}}
{{- $was := dig "spec" "apiServerLoadBalancer" "enabled" false $running -}}
{{- $asked := dig "api_server_load_balancer" "enabled" false $c.capo -}}
{{- if ne $was $asked -}}
  {{- fail (printf "cluster.capo.api_server_load_balancer.enabled: %v, but cluster %s runs with %v: its endpoint was fixed when it was created; a cluster with the other endpoint is a new cluster" $asked $c.name $was) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
capi-cluster.versionSteps fails, before any object is sent, when the version asked of the running
control plane or workers is a downgrade or skips a minor: a commit that breaks the rule changes
nothing, and the HelmRelease says why. internal/upgrades.Step is the definition; a test holds this
copy to it against a real API server. Rendered offline (validate, the CLI), lookup finds nothing
and the step is checked by the CLI from the running cluster instead.
*/}}
{{- define "capi-cluster.versionSteps" -}}
{{- $c := .Values.cluster -}}
{{- $kubeadm := eq $c.providers.bootstrap "kubeadm" -}}
{{- $key := ternary "cluster.kubernetes_version" "cluster.rke2_version" $kubeadm -}}
{{- $asked := ternary $c.kubernetes_version $c.rke2_version $kubeadm | toString -}}
{{- $cp := lookup (ternary "controlplane.cluster.x-k8s.io/v1beta2" "controlplane.cluster.x-k8s.io/v1beta1" $kubeadm) (ternary "KubeadmControlPlane" "RKE2ControlPlane" $kubeadm) .Release.Namespace (printf "%s-control-plane" $c.name) -}}
{{- $md := lookup "cluster.x-k8s.io/v1beta2" "MachineDeployment" .Release.Namespace (printf "%s-workers" $c.name) -}}
{{- include "capi-cluster.versionStep" (list $key $asked (printf "%s-control-plane" $c.name) (dig "spec" "version" "" $cp)) -}}
{{- include "capi-cluster.versionStep" (list $key $asked (printf "%s-workers" $c.name) (dig "spec" "template" "spec" "version" "" $md)) -}}
{{- end -}}

{{/*
capi-cluster.versionStep: Input: (list $key $asked $object $running).
*/}}
{{- define "capi-cluster.versionStep" -}}
{{- $key := index . 0 -}}{{- $asked := index . 1 -}}{{- $object := index . 2 -}}{{- $running := index . 3 | toString -}}
{{- if and $running (ne $running $asked) (regexMatch "^v?[0-9]+\\.[0-9]+\\.[0-9]+" $running) (regexMatch "^v?[0-9]+\\.[0-9]+\\.[0-9]+" $asked) -}}
  {{- $from := semver $running -}}
  {{- $to := semver $asked -}}
  {{- if lt ($to.Compare $from) 0 -}}
    {{- fail (printf "%s: %s is older than %s, which %s runs: a downgrade is not supported; expected %s or a later patch or the next minor (v%d.%d)" $key $asked $running $object $running $from.Major (add1 $from.Minor)) -}}
  {{- end -}}
  {{- if or (ne $to.Major $from.Major) (gt $to.Minor (add1 $from.Minor)) -}}
    {{- fail (printf "%s: %s skips v%d.%d: one minor at a time, expected a v%d.%d release first (%s runs %s)" $key $asked $from.Major (add1 $from.Minor) $from.Major (add1 $from.Minor) $object $running) -}}
  {{- end -}}
{{- end -}}
{{- end -}}

{{/*
capi-cluster.infra: apiGroup, kinds and API version of the infrastructure provider's objects.
*/}}
{{- define "capi-cluster.infra" -}}
{{- if eq .Values.cluster.providers.infrastructure "capd" -}}
{{- dict "apiVersion" "infrastructure.cluster.x-k8s.io/v1beta2" "cluster" "DockerCluster" "template" "DockerMachineTemplate" | toJson -}}
{{- else if eq .Values.cluster.providers.infrastructure "in-memory" -}}
{{- dict "apiVersion" "infrastructure.cluster.x-k8s.io/v1beta2" "cluster" "DevCluster" "template" "DevMachineTemplate" | toJson -}}
{{- else -}}
{{- dict "apiVersion" "infrastructure.cluster.x-k8s.io/v1beta1" "cluster" "OpenStackCluster" "template" "OpenStackMachineTemplate" | toJson -}}
{{- end -}}
{{- end -}}

{{/*
capi-cluster.machineSpec: the infrastructure machine spec of a role (control_plane or workers).
Input: (list $root $role).
*/}}
{{- define "capi-cluster.machineSpec" -}}
{{- $root := index . 0 -}}
{{- $role := index . 1 -}}
{{- $c := $root.Values.cluster -}}
{{- if eq $c.providers.infrastructure "capd" -}}
{{- $spec := dict "customImage" (include "capi-cluster.nodeImage" $root) -}}
{{- if $c.capd.docker_socket -}}
  {{- $_ := set $spec "extraMounts" (list (dict "containerPath" "/var/run/docker.sock" "hostPath" "/var/run/docker.sock")) -}}
{{- end -}}
{{- toJson $spec -}}
{{- else if eq $c.providers.infrastructure "in-memory" -}}
{{- /* CAPD's in-memory backend: a machine, its node, etcd and API server are objects in CAPD's
     memory that come up after these times, as Cluster API's own scale tests set them. Nothing of
     the host is used. */ -}}
{{- $startup := dict "provisioning" (dict "startupDuration" "2s" "startupJitter" "0.2") -}}
{{- toJson (dict "backend" (dict "inMemory" (dict
      "vm" (dict "provisioning" (dict "startupDuration" "10s" "startupJitter" "0.2"))
      "node" $startup "apiServer" $startup "etcd" $startup))) -}}
{{- else -}}
{{- $spec := dict
      "flavor" (index $c $role).flavor
      "image" (dict "filter" (dict "name" $c.capo.image_name))
      "sshKeyName" $c.capo.ssh_key_name -}}
{{- toJson $spec -}}
{{- end -}}
{{- end -}}

{{/*
capi-cluster.nodeImage: the kind node image of CAPD machines, cluster.capd.node_image or the one of
cluster.kubernetes_version. values.ClusterSettings.CAPDNodeImage is the same rule for the CLI; a
test keeps the two the same.
*/}}
{{- define "capi-cluster.nodeImage" -}}
{{- .Values.cluster.capd.node_image | default (printf "kindest/node:%s" .Values.cluster.kubernetes_version) -}}
{{- end -}}

{{/*
capi-cluster.templateName: machine templates are immutable, so their name carries a hash of their
spec: a changed spec is a new template, which the control plane or MachineDeployment rolls out.
Input: (list $root $role $spec).
*/}}
{{- define "capi-cluster.templateName" -}}
{{- $root := index . 0 -}}
{{- printf "%s-%s-%s" $root.Values.cluster.name (index . 1) (index . 2 | toJson | sha256sum | trunc 8) -}}
{{- end -}}

{{/*
capi-cluster.hostsToml: containerd hosts.toml for one upstream registry and its mirrors. The
bootstrap CLI writes the same file into the kind cluster (internal/registrymirror); a test keeps
both identical.
*/}}
{{- define "capi-cluster.hostsToml" -}}
# Written by cluster-init from registry_mirrors.hosts_config.
{{- range $m := . }}

[host.{{ $m.mirror_url | quote }}]
  capabilities = [{{ range $i, $c := ($m.capabilities | default (list "pull" "resolve")) }}{{ if $i }}, {{ end }}{{ $c | quote }}{{ end }}]
{{- if $m.override_path }}
  override_path = true
{{- end }}
{{- if $m.skip_verify }}
  skip_verify = true
{{- end }}
{{- end }}
{{ end -}}

{{/*
capi-cluster.noProxy: the user's no_proxy plus what must never go through a proxy in the cluster.
*/}}
{{- define "capi-cluster.noProxy" -}}
{{- $c := .Values.cluster -}}
{{- $list := list -}}
{{- if .Values.proxies.no_proxy -}}{{- $list = append $list .Values.proxies.no_proxy -}}{{- end -}}
{{- $list = concat $list (list "localhost" "127.0.0.1" ".svc" (printf ".%s" ($c.network.service_domain | default "cluster.local")) $c.network.pods_cidr $c.network.services_cidr) -}}
{{- join "," $list -}}
{{- end -}}

{{- define "capi-cluster.proxyEnabled" -}}
{{- if or .Values.proxies.http_proxy .Values.proxies.https_proxy -}}true{{- end -}}
{{- end -}}

{{/*
capi-cluster.kubeadmFiles: files every kubeadm machine gets: containerd registry mirrors and
proxy settings. Output: JSON list of KubeadmConfig files.
*/}}
{{- define "capi-cluster.kubeadmFiles" -}}
{{- $files := list -}}
{{- range $host := keys .Values.registry_mirrors.hosts_config | sortAlpha -}}
  {{- $files = append $files (dict "path" (printf "/etc/containerd/certs.d/%s/hosts.toml" $host) "permissions" "0644" "owner" "root:root" "content" (include "capi-cluster.hostsToml" (index $.Values.registry_mirrors.hosts_config $host))) -}}
{{- end -}}
{{- if include "capi-cluster.proxyEnabled" . -}}
  {{- $env := printf "[Service]\nEnvironment=\"HTTP_PROXY=%s\"\nEnvironment=\"HTTPS_PROXY=%s\"\nEnvironment=\"NO_PROXY=%s\"\n" .Values.proxies.http_proxy .Values.proxies.https_proxy (include "capi-cluster.noProxy" .) -}}
  {{- $files = append $files (dict "path" "/etc/systemd/system/containerd.service.d/http-proxy.conf" "permissions" "0644" "owner" "root:root" "content" $env) -}}
{{- end -}}
{{- toJson $files -}}
{{- end -}}

{{/*
capi-cluster.kubeadmPreCommands: make containerd read the mirrors (images without a registry
config_path, such as the kind node image, need it added) and pick up the proxy settings.
*/}}
{{- define "capi-cluster.kubeadmPreCommands" -}}
{{- $cmds := list -}}
{{- if .Values.registry_mirrors.hosts_config -}}
  {{- $cmds = append $cmds "grep -q 'config_path' /etc/containerd/config.toml || printf '\\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\\n  config_path = \"/etc/containerd/certs.d\"\\n' >> /etc/containerd/config.toml" -}}
{{- end -}}
{{- if or .Values.registry_mirrors.hosts_config (include "capi-cluster.proxyEnabled" .) -}}
  {{- $cmds = append $cmds "systemctl daemon-reload" -}}
  {{- $cmds = append $cmds "systemctl restart containerd" -}}
{{- end -}}
{{- toJson $cmds -}}
{{- end -}}

{{/*
capi-cluster.kubeletArgs: kubelet arguments of every kubeadm machine.
*/}}
{{- define "capi-cluster.kubeletArgs" -}}
{{- $args := list -}}
{{- if has .Values.cluster.providers.infrastructure (list "capd" "in-memory") -}}
  {{- /* A machine is a container on the host's disk: never evict pods for host disk pressure. A
  simulated machine takes the same (Cluster API's in-memory templates do): kubeadm's
  nodeRegistration may not be empty. */ -}}
  {{- $args = append $args (dict "name" "eviction-hard" "value" "nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%") -}}
{{- else if eq .Values.cluster.providers.infrastructure "capo" -}}
  {{- $args = append $args (dict "name" "provider-id" "value" "openstack:///{{ v1.instance_id }}") -}}
{{- end -}}
{{- toJson $args -}}
{{- end -}}

{{/*
capi-cluster.rke2AgentConfig: the agentConfig of every RKE2 machine, control plane and workers:
air-gapped, RKE2 is installed from the artifacts in the machine's image.
*/}}
{{- define "capi-cluster.rke2AgentConfig" -}}
{{- $ag := .Values.cluster.rke2_air_gapped | default dict -}}
{{- $config := dict -}}
{{- if $ag.enabled }}{{ $_ := set $config "airGapped" true }}{{ end -}}
{{- if and $ag.enabled $ag.artifacts_checksum }}{{ $_ := set $config "airGappedChecksum" $ag.artifacts_checksum }}{{ end -}}
{{- toJson $config -}}
{{- end -}}

{{/*
capi-cluster.rke2Registries: RKE2 privateRegistriesConfig from the mirrors.
*/}}
{{- define "capi-cluster.rke2Registries" -}}
{{- $mirrors := dict -}}
{{- range $host, $list := .Values.registry_mirrors.hosts_config -}}
  {{- $endpoints := list -}}
  {{- range $m := $list -}}{{- $endpoints = append $endpoints $m.mirror_url -}}{{- end -}}
  {{- $_ := set $mirrors $host (dict "endpoint" $endpoints) -}}
{{- end -}}
{{- toJson (dict "mirrors" $mirrors) -}}
{{- end -}}

{{/*
capi-cluster.rke2Files: proxy settings of the rke2 services.
*/}}
{{- define "capi-cluster.rke2Files" -}}
{{- $files := list -}}
{{- if include "capi-cluster.proxyEnabled" . -}}
  {{- $env := printf "HTTP_PROXY=%s\nHTTPS_PROXY=%s\nNO_PROXY=%s\n" .Values.proxies.http_proxy .Values.proxies.https_proxy (include "capi-cluster.noProxy" .) -}}
  {{- range $svc := list "rke2-server" "rke2-agent" -}}
    {{- $files = append $files (dict "path" (printf "/etc/default/%s" $svc) "permissions" "0644" "owner" "root:root" "content" $env) -}}
  {{- end -}}
{{- end -}}
{{- toJson $files -}}
{{- end -}}

{{/*
capi-cluster.workerConfig: the spec of the workers' bootstrap config template (kubeadm or rke2).
*/}}
{{- define "capi-cluster.workerConfig" -}}
{{- if eq .Values.cluster.providers.bootstrap "kubeadm" -}}
  {{- $files := fromJsonArray (include "capi-cluster.kubeadmFiles" .) -}}
  {{- $pre := fromJsonArray (include "capi-cluster.kubeadmPreCommands" .) -}}
  {{- $config := dict "joinConfiguration" (dict "nodeRegistration" (dict "kubeletExtraArgs" (fromJsonArray (include "capi-cluster.kubeletArgs" .)))) -}}
  {{- if $files }}{{ $_ := set $config "files" $files }}{{ end -}}
  {{- if $pre }}{{ $_ := set $config "preKubeadmCommands" $pre }}{{ end -}}
  {{- toJson $config -}}
{{- else -}}
  {{- $registries := fromJson (include "capi-cluster.rke2Registries" .) -}}
  {{- $files := fromJsonArray (include "capi-cluster.rke2Files" .) -}}
  {{- $config := dict "agentConfig" (fromJson (include "capi-cluster.rke2AgentConfig" .)) -}}
  {{- if $registries.mirrors }}{{ $_ := set $config "privateRegistriesConfig" $registries }}{{ end -}}
  {{- if $files }}{{ $_ := set $config "files" $files }}{{ end -}}
  {{- toJson $config -}}
{{- end -}}
{{- end -}}

{{/*
capi-cluster.ownedByTheCluster: the annotations of every object but the Cluster. Cluster API owns
them through the Cluster and deletes them, in order, once the Cluster is deleted: deleting them
alongside it (an uninstall) would remove the infrastructure cluster before the machines, which
then could never be deleted. Helm leaves them to Cluster API; an uninstall deletes the Cluster only.
*/}}
{{- define "capi-cluster.ownedByTheCluster" -}}
helm.sh/resource-policy: keep
{{- end -}}
