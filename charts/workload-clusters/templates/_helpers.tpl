{{/*
workload-clusters.path: the directory of a tenant's workload clusters in the repository.
Input: (list $root $tenant).
*/}}
{{- define "workload-clusters.path" -}}
{{- $root := index . 0 -}}
{{- $t := index . 1 -}}
{{- $t.path | default (printf "./clusters/%s/workload-clusters" $root.Values.cluster.name) -}}
{{- end -}}

{{- define "workload-clusters.labels" -}}
app.kubernetes.io/part-of: cluster-init
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/*
workload-clusters.platformConfigMap: the ConfigMap of the values every workload cluster of a tenant
shares with the management cluster (a valuesFrom layer of their HelmReleases).
*/}}
{{- define "workload-clusters.platformConfigMap" -}}workload-cluster-platform{{- end -}}
