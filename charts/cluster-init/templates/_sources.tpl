{{/*
cluster-init.sources: the sources of the units: an OCIRepository per chart of an OCI source that a
HelmRelease unit uses, and the extra repositories. Input: (list $root $graph).
*/}}
{{- define "cluster-init.sources" -}}
{{- $root := index . 0 -}}
{{- $graph := index . 1 -}}
{{- $ns := $root.Release.Namespace -}}
{{- $charts := dict -}}
{{- /* Sources kept in another namespace (a workload cluster's release reads the platform's) are not this release's to render. */ -}}
{{- if eq (include "cluster-init.sourceNamespace" $root) $ns -}}
{{- range $name := $graph.order -}}
  {{- $g := index $graph.units $name -}}
  {{- if eq $g.kind "helmrelease" -}}
    {{- $repo := fromJson (include "cluster-init.repo" (list $root $name (index $root.Values.units $name))) -}}
    {{- if eq $repo.source.type "oci" -}}
      {{- $_ := set $charts (include "cluster-init.chartSourceName" (list $repo.name $g.chart)) (dict "source" $repo.source "chart" $g.chart) -}}
    {{- end -}}
  {{- end -}}
{{- end -}}
{{- end -}}
{{- range $sourceName := keys $charts | sortAlpha }}
{{- $c := index $charts $sourceName }}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata:
  name: {{ $sourceName | quote }}
  namespace: {{ $ns | quote }}
  labels:
    {{- include "cluster-init.labels" $root | nindent 4 }}
spec:
  {{- $spec := fromJson (include "cluster-init.sourceSpec" (list $c.source (printf "charts/%s" (base $c.chart)))) -}}
  {{- $_ := set $spec "layerSelector" (dict "mediaType" "application/vnd.cncf.helm.chart.content.v1.tar+gzip" "operation" "copy") }}
  {{- toYaml $spec | nindent 2 }}
{{- end }}
{{- range $name := keys $root.Values.repositories | sortAlpha }}
{{- $src := index $root.Values.repositories $name }}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: {{ include "cluster-init.sourceKind" (list $src (printf "repositories.%s" $name)) }}
metadata:
  name: {{ $name | quote }}
  namespace: {{ $ns | quote }}
  labels:
    {{- include "cluster-init.labels" $root | nindent 4 }}
spec:
  {{- toYaml (fromJson (include "cluster-init.sourceSpec" (list $src "source"))) | nindent 2 }}
{{- end }}
{{- end -}}
