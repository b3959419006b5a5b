{{/*
The Flux objects of a unit. Each unit becomes one Kustomization named after it; its spec is the
defaults (cluster-init.kustomizationSpec), then what its kind adds (cluster-init.helmreleaseUnit
for a unit with a chart, cluster-init.rootSource for the units carrying cluster-init's own source),
then the unit's own kustomization_spec.
*/}}

{{/*
cluster-init.unit: the Kustomization of one enabled unit. Input: (list $root $name $graphUnit).
*/}}
{{- define "cluster-init.unit" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $g := index . 2 -}}
{{- $u := index $root.Values.units $name -}}
{{- $ks := (fromJson (include "cluster-init.tplWalk" (list $root ($u.kustomization_spec | default dict)))).v -}}
{{- $spec := fromJson (include "cluster-init.kustomizationSpec" (list $root $name $g)) -}}
{{- $healthChecks := $ks.healthChecks | default list -}}
{{- if eq $g.kind "helmrelease" -}}
  {{- $hr := fromJson (include "cluster-init.helmreleaseUnit" (list $root $name $g)) -}}
  {{- $spec = mergeOverwrite $spec (omit $hr "healthCheck") -}}
  {{- if $healthChecks -}}
    {{- $healthChecks = prepend $healthChecks $hr.healthCheck -}}
  {{- end -}}
{{- end -}}
{{- if $u.root_source -}}
  {{- $rs := fromJson (include "cluster-init.rootSource" $root) -}}
  {{- $_ := set $spec "components" $rs.components -}}
  {{- $_ := set $spec "patches" (concat $spec.patches $rs.patches) -}}
{{- end -}}
{{- $spec = mergeOverwrite $spec (omit $ks "healthChecks" "patches") -}}
{{- if $ks.patches -}}{{- $_ := set $spec "patches" (concat $spec.patches $ks.patches) -}}{{- end -}}
{{- if $healthChecks -}}
  {{- /* Flux ignores healthChecks when wait is true: checking them replaces waiting for the inventory. */ -}}
  {{- $_ := set $spec "healthChecks" $healthChecks -}}
  {{- $_ := set $spec "wait" false -}}
{{- end -}}
{{- if not $spec.patches -}}{{- $spec = omit $spec "patches" -}}{{- end }}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: {{ $g.object | quote }}
  namespace: {{ $root.Release.Namespace | quote }}
  labels:
    {{- include "cluster-init.labels" $root | nindent 4 }}
    cluster-init.dev/unit: {{ $name | quote }}
    {{- include "cluster-init.shardLabel" $root | nindent 4 }}
  annotations:
    cluster-init.dev/description: {{ $g.description | quote }}
spec:
  {{- toYaml $spec | nindent 2 }}
{{- end -}}

{{/*
cluster-init.kustomizationSpec: what every unit's Kustomization has: intervals, timeout, its
source, its dependencies and, for a unit applied into another cluster, that cluster's kubeconfig.
Input: (list $root $name $graphUnit). Output: JSON.
*/}}
{{- define "cluster-init.kustomizationSpec" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $g := index . 2 -}}
{{- $u := index $root.Values.units $name -}}
{{- $repo := fromJson (include "cluster-init.repo" (list $root $name $u)) -}}
{{- $spec := dict
      "interval" $root.Values.unit_defaults.interval
      "retryInterval" $root.Values.unit_defaults.retry_interval
      "timeout" $g.timeout
      "prune" true
      "wait" true
      "sourceRef" (dict "kind" (include "cluster-init.sourceKind" (list $repo.source $repo.key)) "name" $repo.name)
      "patches" list -}}
{{- $sourceNamespace := include "cluster-init.sourceNamespace" $root -}}
{{- if ne $sourceNamespace $root.Release.Namespace -}}
  {{- $_ := set $spec.sourceRef "namespace" $sourceNamespace -}}
{{- end -}}
{{- if $g.depends_on -}}
  {{- $deps := list -}}
  {{- range $d := $g.depends_on -}}
    {{- $ref := dict "name" (include "cluster-init.unitObject" (list $root $d)) -}}
    {{- if has $d ($g.applied_deps | default list) -}}
      {{- /* Flux's own check, in place of Ready: the dependency has applied its objects (the
           CLI's hand-offs, internal/handoff, read it the same way). */ -}}
      {{- $_ := set $ref "readyExpr" "has(dep.status.inventory)" -}}
    {{- end -}}
    {{- $deps = append $deps $ref -}}
  {{- end -}}
  {{- $_ := set $spec "dependsOn" $deps -}}
{{- end -}}
{{- if $u.kubeconfig -}}
  {{- $kc := (fromJson (include "cluster-init.tplWalk" (list $root $u.kubeconfig))).v -}}
  {{- if not $kc.secret -}}
    {{- fail (printf "units.%s.kubeconfig.secret: expected the name of a kubeconfig Secret" $name) -}}
  {{- end -}}
  {{- $_ := set $spec "kubeConfig" (dict "secretRef" (dict "name" $kc.secret "key" ($kc.key | default "value"))) -}}
  {{- if eq $root.Values.context "workload" -}}
    {{- /* A workload cluster goes with its kubeconfig Secret: nothing is left to prune in it, and
         waiting to reach it would keep the unit from ever being deleted. */ -}}
    {{- $_ := set $spec "deletionPolicy" "Orphan" -}}
  {{- end -}}
{{- else if $root.Values.service_account -}}
  {{- /* Applied as that account (a workload cluster's: confined to its tenant's namespace). A unit
       reaching another cluster acts there as its kubeconfig's user. */ -}}
  {{- $_ := set $spec "serviceAccountName" $root.Values.service_account -}}
{{- end -}}
{{- toJson $spec -}}
{{- end -}}

{{/*
cluster-init.helmreleaseUnit: what a unit with a chart adds: the path of
kustomize-components/helmrelease-unit, whose only object is a HelmRelease that a patch names after
the unit and gives its spec, and the health check of that HelmRelease. Input: (list $root $name
$graphUnit). Output: JSON {path, targetNamespace, patches, healthCheck}.
*/}}
{{- define "cluster-init.helmreleaseUnit" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $g := index . 2 -}}
{{- $u := index $root.Values.units $name -}}
{{- $ns := $root.Release.Namespace -}}
{{- $sourceNamespace := include "cluster-init.sourceNamespace" $root -}}
{{- $object := include "cluster-init.unitObject" (list $root $name) -}}
{{- $repo := fromJson (include "cluster-init.repo" (list $root $name $u)) -}}
{{- $hrs := (fromJson (include "cluster-init.tplWalk" (list $root $u.helmrelease_spec))).v -}}
{{- /* A failed install or upgrade is retried, never remediated by an uninstall: the objects of a
     unit (cluster definitions!) must not be deleted because one action failed. */ -}}
{{- $retry := dict "name" "RetryOnFailure" "retryInterval" "1m" -}}
{{- $hr := dict
      "interval" $root.Values.unit_defaults.interval
      "install" (dict "crds" "CreateReplace" "strategy" $retry)
      "upgrade" (dict "crds" "CreateReplace" "strategy" $retry) -}}
{{- $chartSpec := omit $hrs.chart.spec "chart" -}}
{{- if eq $repo.source.type "oci" -}}
  {{- $_ := set $hr "chartRef" (dict "kind" "OCIRepository" "name" (include "cluster-init.chartSourceName" (list $repo.name $g.chart)) "namespace" $sourceNamespace) -}}
{{- else -}}
  {{- $_ := set $hr "chart" (dict "spec" (mergeOverwrite (dict "chart" $g.chart "reconcileStrategy" "Revision" "sourceRef" (dict "kind" "GitRepository" "name" $repo.name "namespace" $sourceNamespace)) $chartSpec)) -}}
{{- end -}}
{{- $values := dict -}}
{{- range $key := $u.helm_values_from | default list -}}
  {{- if eq $key "credentials" -}}
    {{- fail (printf "units.%s.helm_values_from: credentials are secret and reach a chart only through valuesFrom a Secret" $name) -}}
  {{- end -}}
  {{- if hasKey $root.Values $key -}}{{- $_ := set $values $key (index $root.Values $key) -}}{{- end -}}
{{- end -}}
{{- if $root.Values.service_account -}}
  {{- $_ := set $hr "serviceAccountName" $root.Values.service_account -}}
{{- end -}}
{{- $hr = mergeOverwrite $hr (omit $hrs "chart" "values") -}}
{{- $_ := set $hr "values" (mergeOverwrite $values ($hrs.values | default dict)) -}}
{{- $patch := list (dict "op" "replace" "path" "/metadata/name" "value" $object) (dict "op" "replace" "path" "/spec" "value" $hr) -}}
{{- with include "cluster-init.shardLabel" $root -}}
  {{- $patch = append $patch (dict "op" "add" "path" "/metadata/labels" "value" (fromYaml .)) -}}
{{- end -}}
{{- dict
      "path" "./kustomize-components/helmrelease-unit"
      "targetNamespace" $ns
      "patches" (list (dict "target" (dict "group" "helm.toolkit.fluxcd.io" "kind" "HelmRelease" "name" "unit") "patch" (toJson $patch)))
      "healthCheck" (dict "apiVersion" "helm.toolkit.fluxcd.io/v2" "kind" "HelmRelease" "name" $object "namespace" $ns)
    | toJson -}}
{{- end -}}

{{/*
cluster-init.rootSource: what a unit carrying the cluster-init source objects adds: the component of
the source's type, and patches setting their spec. Input: $root. Output: JSON {components, patches}.
*/}}
{{- define "cluster-init.rootSource" -}}
{{- $src := .Values.source -}}
{{- $patches := list -}}
{{- if eq $src.type "oci" -}}
  {{- $patches = append $patches (dict "target" (dict "kind" "OCIRepository" "name" "cluster-init") "patch" (toJson (dict "apiVersion" "source.toolkit.fluxcd.io/v1" "kind" "OCIRepository" "metadata" (dict "name" "cluster-init") "spec" (fromJson (include "cluster-init.sourceSpec" (list $src "source")))))) -}}
  {{- $chartSource := include "cluster-init.chartSourceName" (list "cluster-init" "charts/cluster-init") -}}
  {{- $patches = append $patches (dict "target" (dict "kind" "OCIRepository" "name" $chartSource) "patch" (toJson (dict "apiVersion" "source.toolkit.fluxcd.io/v1" "kind" "OCIRepository" "metadata" (dict "name" $chartSource) "spec" (fromJson (include "cluster-init.sourceSpec" (list $src "charts/cluster-init")))))) -}}
{{- else -}}
  {{- $spec := fromJson (include "cluster-init.sourceSpec" (list $src "")) -}}
  {{- if and (eq (include "cluster-init.changeGate" .) "true") .Values.released_commit -}}
    {{- /* Pinned to what the change gate released; cluster-init-incoming follows the branch. */ -}}
    {{- $_ := set $spec "ref" (merge (dict "commit" .Values.released_commit) ($spec.ref | default dict)) -}}
  {{- end -}}
  {{- $patches = append $patches (dict "target" (dict "kind" "GitRepository" "name" "cluster-init") "patch" (toJson (dict "apiVersion" "source.toolkit.fluxcd.io/v1" "kind" "GitRepository" "metadata" (dict "name" "cluster-init") "spec" $spec))) -}}
{{- end -}}
{{- dict "components" (list (printf "../source-%s" $src.type)) "patches" $patches | toJson -}}
{{- end -}}
