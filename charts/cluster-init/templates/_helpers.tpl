{{/*
Errors raised here start with the values key they are about ("units.cni.depends_on.foo: ..."),
so that the bootstrap CLI can point at the file and line that set it.
*/}}

{{/*
cluster-init.tplWalk renders, as a template, every string leaf that contains "{{" in a value
(map, list or scalar). Input: (list $root $value). Output: JSON {"v": <rendered value>}, because
named templates can only return strings.
*/}}
{{- define "cluster-init.tplWalk" -}}
{{- $root := index . 0 -}}
{{- $v := index . 1 -}}
{{- if kindIs "map" $v -}}
  {{- $out := dict -}}
  {{- range $k, $x := $v -}}
    {{- $_ := set $out $k (fromJson (include "cluster-init.tplWalk" (list $root $x))).v -}}
  {{- end -}}
  {{- dict "v" $out | toJson -}}
{{- else if kindIs "slice" $v -}}
  {{- $out := list -}}
  {{- range $x := $v -}}
    {{- $out = append $out (fromJson (include "cluster-init.tplWalk" (list $root $x))).v -}}
  {{- end -}}
  {{- dict "v" $out | toJson -}}
{{- else if and (kindIs "string" $v) (contains "{{" $v) -}}
  {{- dict "v" (tpl $v $root) | toJson -}}
{{- else -}}
  {{- dict "v" $v | toJson -}}
{{- end -}}
{{- end -}}

{{/*
cluster-init.condition evaluates a bool-or-template field. Input: (list $root $value $key).
Output: JSON {"value": bool, "template": "<template or empty>"}.
*/}}
{{- define "cluster-init.condition" -}}
{{- $root := index . 0 -}}
{{- $v := index . 1 -}}
{{- $key := index . 2 -}}
{{- if kindIs "bool" $v -}}
  {{- dict "value" $v "template" "" | toJson -}}
{{- else if kindIs "string" $v -}}
  {{- $out := tpl $v $root | trim -}}
  {{- if not (has $out (list "true" "false")) -}}
    {{- fail (printf "%s: template %q rendered %q, expected true or false" $key $v $out) -}}
  {{- end -}}
  {{- dict "value" (eq $out "true") "template" $v | toJson -}}
{{- else -}}
  {{- fail (printf "%s: expected a bool or a template string, got %s" $key (kindOf $v)) -}}
{{- end -}}
{{- end -}}

{{/*
cluster-init.unitState tells whether a unit renders in this release and why.
Input: (list $root $name). Output: JSON {"enabled": bool, "reason": string}.
*/}}
{{- define "cluster-init.unitState" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $unit := index $root.Values.units $name -}}
{{- $contexts := $unit.contexts | default (list "bootstrap" "management" "workload") -}}
{{- if not (has $root.Values.context $contexts) -}}
  {{- dict "enabled" false "reason" (printf "not in context %s (contexts: %s)" $root.Values.context (join ", " $contexts)) | toJson -}}
{{- else if not (hasKey $unit "enabled") -}}
  {{- dict "enabled" true "reason" "enabled by default" | toJson -}}
{{- else -}}
  {{- $c := fromJson (include "cluster-init.condition" (list $root $unit.enabled (printf "units.%s.enabled" $name))) -}}
  {{- if $c.template -}}
    {{- dict "enabled" $c.value "reason" (printf "enabled: %s is %t" $c.template $c.value) | toJson -}}
  {{- else -}}
    {{- dict "enabled" $c.value "reason" (printf "enabled: %t" $c.value) | toJson -}}
  {{- end -}}
{{- end -}}
{{- end -}}

{{/*
cluster-init.unitEnabled: "true" or "false", for use in other units' templates, e.g.
  enabled: '{{ include "cluster-init.unitEnabled" (list . "cluster") }}'
*/}}
{{- define "cluster-init.unitEnabled" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- if not (hasKey $root.Values.units $name) -}}
  {{- fail (printf "cluster-init.unitEnabled: unknown unit %q" $name) -}}
{{- end -}}
{{- (fromJson (include "cluster-init.unitState" (list $root $name))).enabled -}}
{{- end -}}

{{/*
cluster-init.changeGate: "true" where the change gate holds each commit of the platform's repository
until a backup before it is written (internal/changegate): the management cluster's backup unit
runs, with backup.before_change, and the release reads a git source that follows a branch or tag
(one pinned to a commit by the values has nothing to hold). Input: $root.
*/}}
{{- define "cluster-init.changeGate" -}}
{{- $src := .Values.source -}}
{{- and (eq .Values.context "management") (eq $src.type "git") (not ($src.ref | default dict).commit) .Values.backup.before_change (eq (include "cluster-init.unitEnabled" (list . "backup")) "true") -}}
{{- end -}}

{{/*
cluster-init.platformDirectoriesOnly: the source ignore (gitignore lines) that keeps only the
directories of the platform's repository that the platform applies, which no tenant may use (the
same four the workload-clusters chart refuses as a tenant's path, $platformDirs of its
tenants.yaml): an artifact of them alone has the same digest for every commit that changes only
tenants' directories. Input: $root.
*/}}
{{- define "cluster-init.platformDirectoriesOnly" -}}
{{- $cluster := .Values.cluster.name -}}
{{- list "/*" "!/charts/" "!/kustomize-components/" "!/environment-values/" "!/clusters/" "/clusters/*" (printf "!/clusters/%s/" $cluster) (printf "/clusters/%s/*" $cluster) (printf "!/clusters/%s/apps/" $cluster) | join "\n" -}}
{{- end -}}

{{/*
cluster-init.sourceKind: the Flux kind of a source entry (git -> GitRepository, oci -> OCIRepository).
Input: (list $source $key).
*/}}
{{- define "cluster-init.sourceKind" -}}
{{- $source := index . 0 -}}
{{- $key := index . 1 -}}
{{- if eq $source.type "git" -}}GitRepository
{{- else if eq $source.type "oci" -}}OCIRepository
{{- else -}}{{- fail (printf "%s.type: unknown source type %q, expected git or oci" $key $source.type) -}}
{{- end -}}
{{- end -}}

{{/*
cluster-init.repo returns the source entry a unit reads from, with its Flux name.
Input: (list $root $unitName $unit). Output: JSON {"name", "key", "source"}.
*/}}
{{- define "cluster-init.repo" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $unit := index . 2 -}}
{{- $repo := $unit.repo | default "cluster-init" -}}
{{- if eq $repo "cluster-init" -}}
  {{- dict "name" "cluster-init" "key" "source" "source" $root.Values.source | toJson -}}
{{- else if hasKey $root.Values.repositories $repo -}}
  {{- dict "name" $repo "key" (printf "repositories.%s" $repo) "source" (index $root.Values.repositories $repo) | toJson -}}
{{- else -}}
  {{- fail (printf "units.%s.repo: unknown repository %q (known: cluster-init%s)" $name $repo (include "cluster-init.prefixedKeys" $root.Values.repositories)) -}}
{{- end -}}
{{- end -}}

{{- define "cluster-init.prefixedKeys" -}}
{{- range $k := keys . | sortAlpha -}}, {{ $k }}{{- end -}}
{{- end -}}

{{/*
cluster-init.sourceSpec: the spec of a Flux source object for a source entry.
Input: (list $source $urlSuffix). OCI artifacts live under <url>/<suffix>.
*/}}
{{- define "cluster-init.sourceSpec" -}}
{{- $source := index . 0 -}}
{{- $suffix := index . 1 -}}
{{- $spec := dict "interval" ($source.interval | default "5m") -}}
{{- if eq $source.type "oci" -}}
  {{- $_ := set $spec "url" (printf "%s/%s" (trimSuffix "/" $source.url) $suffix) -}}
  {{- $_ := set $spec "ref" ($source.ref | default (dict "tag" "latest")) -}}
  {{- if $source.insecure -}}{{- $_ := set $spec "insecure" true -}}{{- end -}}
{{- else -}}
  {{- $_ := set $spec "url" $source.url -}}
  {{- $_ := set $spec "ref" $source.ref -}}
{{- end -}}
{{- if $source.secret_ref -}}{{- $_ := set $spec "secretRef" (dict "name" $source.secret_ref) -}}{{- end -}}
{{- toJson $spec -}}
{{- end -}}

{{/*
cluster-init.chartSourceName: name of the OCIRepository holding a chart of an OCI source.
Input: (list $repoName $chartPath).
*/}}
{{- define "cluster-init.chartSourceName" -}}
{{- printf "%s-chart-%s" (index . 0) (base (index . 1)) -}}
{{- end -}}

{{/*
cluster-init.unitObject: the name of a unit's Flux object (and of its HelmRelease). A workload
cluster's release shares its namespace with other workload clusters: its objects are named after
the release. Input: (list $root $unitName).
*/}}
{{- define "cluster-init.unitObject" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- if eq $root.Values.context "workload" -}}{{- printf "%s-%s" $root.Release.Name $name -}}{{- else -}}{{- $name -}}{{- end -}}
{{- end -}}

{{/*
cluster-init.sourceNamespace: the namespace of the sources (the release's own, unless the values say
where the platform keeps them: a workload cluster's release reads the management cluster's).
*/}}
{{- define "cluster-init.sourceNamespace" -}}
{{- .Values.source.namespace | default .Release.Namespace -}}
{{- end -}}

{{/*
cluster-init.labels: the labels of every object the chart renders for a unit.
*/}}
{{- define "cluster-init.labels" -}}
app.kubernetes.io/part-of: cluster-init
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/*
cluster-init.shardLabel: the label of a Flux object of a workload cluster's release: its tenant's
Flux controller shard (flux_shard), so that neither the platform's controllers nor another tenant's
reconcile it; nothing in the other contexts, or without a shard.
*/}}
{{- define "cluster-init.shardLabel" -}}
{{- if and (eq .Values.context "workload") .Values.flux_shard -}}
sharding.fluxcd.io/key: {{ .Values.flux_shard | quote }}
{{- end -}}
{{- end -}}

{{/*
cluster-init.clusterHelp: what to look at when the cluster unit blocks, for the providers and
values the release renders with: where the machines get what they need, and the values that
change it.
*/}}
{{- define "cluster-init.clusterHelp" -}}
{{- $c := .Values.cluster -}}
{{- $image := ternary "cluster.capd.node_image" "cluster.capo.image_name" (eq $c.providers.infrastructure "capd") -}}
{{- if eq $c.providers.infrastructure "capo" -}}
CAPO reaches the OpenStack cloud {{ $c.capo.cloud_name | quote }} of credentials.openstack.clouds_yaml: an authentication or connection error is its auth_url or credentials (secrets.yaml), a missing image, flavor or network is cluster.capo.* or the flavors of cluster.control_plane and cluster.workers; a server refused (InstanceCreateFailed: quota exceeded) or in ERROR (InstanceStateError) is the cloud's answer, which CAPO does not retry: the project's quota and `openstack server show` tell why, and deleting the Machine makes a new one.
{{- end -}}
{{- if eq $c.providers.bootstrap "rke2" -}}
{{- if eq $c.providers.infrastructure "capo" }} {{ end -}}
{{- if ($c.rke2_air_gapped | default dict).enabled -}}
Air-gapped RKE2 installs from /opt/rke2-artifacts and /opt/install.sh of the machines' image ({{ $image }}): a machine whose bootstrap fails there lacks them, or their checksum is not cluster.rke2_air_gapped.artifacts_checksum.
{{- else -}}
RKE2 machines download RKE2 {{ $c.rke2_version }} at first boot: a bootstrap that fails at rke2-server.service or the RKE2 install could not download it. Make the download reachable from the machines (proxies.https_proxy), or install from the machines' image: cluster.rke2_air_gapped.enabled: true with {{ $image }} holding the release's artifacts in /opt/rke2-artifacts and its install script as /opt/install.sh.
{{- end -}}
{{- end -}}
{{- end -}}
