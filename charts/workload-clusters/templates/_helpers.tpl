{{/*
workload-clusters.path: the directory of a tenant's workload clusters in its repository: the whole
of its own repository, or its directory of the platform's.
Input: (list $root $tenant).
*/}}
{{- define "workload-clusters.path" -}}
{{- $root := index . 0 -}}
{{- $t := index . 1 -}}
{{- if $t.repository -}}
{{- $t.path | default "./" -}}
{{- else -}}
{{- $t.path | default (printf "./clusters/%s/workload-clusters" $root.Values.cluster.name) -}}
{{- end -}}
{{- end -}}

{{/*
workload-clusters.repositoryKey: a repository's URL as the tenants' rules compare it: two URLs that
differ only by case, a trailing slash or .git are the same repository. Input: the URL.
*/}}
{{- define "workload-clusters.repositoryKey" -}}
{{- . | trimSuffix "/" | trimSuffix ".git" | lower -}}
{{- end -}}

{{/*
workload-clusters.labels: the labels of every object of this chart. cluster-init.dev/platform marks
what the platform keeps in a tenant's namespace: the builder account may not change or delete it.
*/}}
{{- define "workload-clusters.labels" -}}
app.kubernetes.io/part-of: cluster-init
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
cluster-init.dev/platform: "true"
{{- end -}}

{{/*
workload-clusters.platformConfigMap: the ConfigMap of the values every workload cluster of a tenant
shares with the management cluster (a valuesFrom layer of their HelmReleases).
*/}}
{{- define "workload-clusters.platformConfigMap" -}}workload-cluster-platform{{- end -}}

{{/*
workload-clusters.paramsConfigMap: the ConfigMap of a tenant's rules (its limits, the names and
versions it may use), the parameters of the admission policies in its namespace. The tenant's
accounts cannot read or change it.
*/}}
{{- define "workload-clusters.paramsConfigMap" -}}cluster-init-tenant{{- end -}}

{{/*
workload-clusters.builder: the ServiceAccount, in a tenant's namespace, that helm-controller and
kustomize-controller impersonate to build the tenant's clusters from its values: whatever a value
makes of a template, it cannot write outside the namespace.
*/}}
{{- define "workload-clusters.builder" -}}cluster-builder{{- end -}}

{{/*
workload-clusters.tenant: a tenant's settings, defaults applied and checked.
Input: (list $root $namespace $tenant). Output: JSON {path, infrastructure, name_prefix, limits, repository,
repository_url, git_credentials, readers_group, shard, capo, cloud_credentials}; repository is "" for the
platform's; capo (the cloud's settings of its clusters) and cloud_credentials ({clouds_yaml,
cacert}) are empty but on OpenStack. The result holds secrets: never printed.
*/}}
{{- define "workload-clusters.tenant" -}}
{{- $root := index . 0 -}}
{{- $ns := index . 1 -}}
{{- $t := index . 2 | default dict -}}
{{- $key := printf "workload_clusters.tenants.%s" $ns -}}
{{- $limits := mergeOverwrite (deepCopy $root.Values.workload_clusters.default_limits) ($t.limits | default dict) -}}
{{- range $k, $v := $limits -}}
  {{- if not (regexMatch "^[0-9]+$" (toString $v)) -}}
    {{- fail (printf "%s.limits.%s: expected a whole number of at least 0, got %v" $key $k $v) -}}
  {{- end -}}
{{- end -}}
{{- $creds := dig "tenants" $ns "git" dict ($root.Values.credentials | default dict) -}}
{{- if and $creds (not $t.repository) -}}
  {{- fail (printf "credentials.tenants.%s: credentials for a repository of its own, but workload_clusters.tenants.%s.repository is not set: expected its url there (the tenant reads its directory of the platform's repository otherwise)" $ns $ns) -}}
{{- end -}}
{{- /* What the tenant's clusters run on: the management cluster's infrastructure, or CAPD's
     in-memory simulation where CAPD runs (the provider serves both) with kubeadm (the only
     control plane it simulates). */ -}}
{{- $mgmt := $root.Values.cluster.providers -}}
{{- $infra := $t.infrastructure | default $mgmt.infrastructure -}}
{{- $simulates := and (eq $mgmt.infrastructure "capd") (eq $mgmt.bootstrap "kubeadm") -}}
{{- if not (or (eq $infra $mgmt.infrastructure) (and (eq $infra "in-memory") $simulates)) -}}
  {{- fail (printf "%s.infrastructure: %q, but the management cluster runs bootstrap %s and infrastructure %s (in-memory needs kubeadm on capd): expected %s%s" $key $infra $mgmt.bootstrap $mgmt.infrastructure $mgmt.infrastructure (ternary " or in-memory" "" $simulates)) -}}
{{- end -}}
{{- /* On OpenStack: the cloud's settings of the tenant's clusters (the management cluster's, or
     the tenant's project's) and the credentials CAPO builds them with, the tenant's own or the
     platform's, in a Secret of the namespace the tenant never reads. The management cluster's
     floating IP is its own: never a tenant's. */ -}}
{{- $capo := dict -}}
{{- $cloudCreds := dict -}}
{{- $tenantCloudCreds := dig "tenants" $ns "openstack" dict ($root.Values.credentials | default dict) -}}
{{- if eq $infra "capo" -}}
  {{- /* A deep copy: mergeOverwrite writes into its first argument, and pick copies only the top
       level (one tenant's load balancer choice would become the platform's). */ -}}
  {{- $capo = mergeOverwrite (deepCopy (pick $root.Values.cluster.capo "cloud_name" "image_name" "external_network_id" "ssh_key_name" "node_cidr" "dns_nameservers" "api_server_load_balancer")) (deepCopy ($t.capo | default dict)) -}}
  {{- $_ := set $capo "credentials_secret" (include "workload-clusters.cloudCredentialsSecret" $root) -}}
  {{- $cloudCreds = $tenantCloudCreds | default (dig "openstack" dict ($root.Values.credentials | default dict)) -}}
  {{- if not $cloudCreds.clouds_yaml -}}
    {{- fail (printf "credentials.tenants.%s.openstack.clouds_yaml: the clusters of tenant %s run on OpenStack: expected the clouds.yaml of its project there, or the platform's in credentials.openstack (in secrets.yaml)" $ns $ns) -}}
  {{- end -}}
  {{- /* Its cloud alone: not every cloud of a clouds.yaml goes to the namespace. The text is kept
       as written (a YAML round trip would retype an unquoted password such as 0123), so a
       clouds.yaml of several clouds is refused. The message names no content (the Go checks name
       the file and line beforehand). */ -}}
  {{- $clouds := dig "clouds" dict (fromYaml $cloudCreds.clouds_yaml) -}}
  {{- if or (not (kindIs "map" $clouds)) (ne (len $clouds) 1) (not (hasKey $clouds $capo.cloud_name)) -}}
    {{- fail (printf "credentials.tenants.%s.openstack.clouds_yaml (or credentials.openstack.clouds_yaml, its default): expected a clouds.yaml of one cloud, %q, for tenant %s's clusters: they are given that file, and no other cloud of the platform's" $ns $capo.cloud_name $ns) -}}
  {{- end -}}
{{- else if or $t.capo $tenantCloudCreds -}}
  {{- fail (printf "%s.capo, credentials.tenants.%s.openstack: set, but the tenant's clusters run on %s, not capo" $key $ns $infra) -}}
{{- end -}}
{{- dict
      "path" (include "workload-clusters.path" (list $root $t))
      "infrastructure" $infra
      "name_prefix" ($t.name_prefix | default "")
      "limits" $limits
      "repository" ($t.repository | default "")
      "repository_url" (dig "url" "" ($t.repository | default dict))
      "git_credentials" (not (empty $creds))
      "readers_group" ($t.readers_group | default "")
      "shard" ($t.shard | default $ns)
      "capo" $capo
      "cloud_credentials" $cloudCreds
    | toJson -}}
{{- end -}}

{{/*
workload-clusters.releaseSpec: what the platform sets in every workload cluster's HelmRelease
(the tenant writes only its name and spec.values.cluster). The one definition of it: the tenants'
Kustomizations patch it in, and the admission policy refuses a HelmRelease whose spec is anything
else (workload-clusters.celExactly renders the check from the same object).
Input: $root. Output: JSON.
*/}}
{{- define "workload-clusters.releaseSpec" -}}
{{- $retry := dict "name" "RetryOnFailure" "retryInterval" "1m" -}}
{{- dict
      "interval" "10m"
      "serviceAccountName" (include "workload-clusters.builder" .)
      "chart" (dict "spec" (dict
        "chart" "./charts/cluster-init"
        "version" "*"
        "reconcileStrategy" "Revision"
        "sourceRef" (dict "kind" "GitRepository" "name" "cluster-init" "namespace" .Release.Namespace)
        "valuesFiles" (list "./charts/cluster-init/values.yaml" "./charts/cluster-init/workload-cluster.values.yaml")))
      "install" (dict "disableWait" true "strategy" $retry)
      "upgrade" (dict "disableWait" true "strategy" $retry)
      "valuesFrom" (list (dict "kind" "ConfigMap" "name" (include "workload-clusters.platformConfigMap" .) "valuesKey" "values.yaml"))
    | toJson -}}
{{- end -}}

{{/*
workload-clusters.celExactly: a CEL expression that holds when the field at $path is $value and
nothing more: every map has exactly these keys, every list these items, every scalar this value.
Input: (list $path $value). $path is a CEL expression (object.spec.chart).
*/}}
{{- define "workload-clusters.celExactly" -}}
{{- $path := index . 0 -}}
{{- $v := index . 1 -}}
{{- if kindIs "map" $v -}}
  {{- $keys := keys $v | sortAlpha -}}
  {{- $parts := list (printf "%s.all(k, k in %s)" $path (toJson $keys)) -}}
  {{- range $k := $keys -}}
    {{- $parts = append $parts (printf "has(%s.%s)" $path $k) -}}
    {{- $parts = append $parts (include "workload-clusters.celExactly" (list (printf "%s.%s" $path $k) (index $v $k))) -}}
  {{- end -}}
  {{- printf "(%s)" (join " && " $parts) -}}
{{- else if kindIs "slice" $v -}}
  {{- $parts := list (printf "size(%s) == %d" $path (len $v)) -}}
  {{- range $i, $x := $v -}}
    {{- $parts = append $parts (include "workload-clusters.celExactly" (list (printf "%s[%d]" $path $i) $x)) -}}
  {{- end -}}
  {{- printf "(%s)" (join " && " $parts) -}}
{{- else -}}
  {{- printf "%s == %s" $path (toJson $v) -}}
{{- end -}}
{{- end -}}

{{/*
workload-clusters.celStrayFields: a CEL expression, the list of the keys under a path of an object
that are not among the keys allowed there, each named by its path ("spec.patches[].target.x").
Input: (list $expr $segments $keys $prefix $depth): $expr the CEL expression of the object,
$segments the path's segments below it (a field "a", every item of a list "a[]", every value of a
map "a{}"), $keys the keys allowed at the end of the path, $prefix a CEL string expression of the
path so far, $depth the nesting depth (names the comprehension variables apart).
*/}}
{{- define "workload-clusters.celStrayFields" -}}
{{- $e := index . 0 -}}
{{- $segs := index . 1 -}}
{{- $keys := index . 2 -}}
{{- $prefix := index . 3 -}}
{{- $d := index . 4 -}}
{{- if not $segs -}}
  {{- $k := printf "k%d" $d -}}
  {{- printf "%s.filter(%s, !(%s in %s)).map(%s, %s + %s)" $e $k $k (toJson $keys) $k $prefix $k -}}
{{- else -}}
  {{- $seg := first $segs -}}
  {{- $v := printf "v%d" $d -}}
  {{- if hasSuffix "[]" $seg -}}
    {{- $f := printf "%s.%s" $e (trimSuffix "[]" $seg) -}}
    {{- $inner := include "workload-clusters.celStrayFields" (list $v (rest $segs) $keys (printf "%s + '%s.'" $prefix $seg) (add1 $d)) -}}
    {{- printf "(has(%s) ? %s.map(%s, %s).flatten() : [])" $f $f $v $inner -}}
  {{- else if hasSuffix "{}" $seg -}}
    {{- $f := printf "%s.%s" $e (trimSuffix "{}" $seg) -}}
    {{- $inner := include "workload-clusters.celStrayFields" (list (printf "%s[%s]" $f $v) (rest $segs) $keys (printf "%s + '%s.' + %s + '.'" $prefix (trimSuffix "{}" $seg) $v) (add1 $d)) -}}
    {{- printf "(has(%s) ? %s.map(%s, %s).flatten() : [])" $f $f $v $inner -}}
  {{- else -}}
    {{- $f := printf "%s.%s" $e $seg -}}
    {{- $inner := include "workload-clusters.celStrayFields" (list $f (rest $segs) $keys (printf "%s + '%s.'" $prefix $seg) $d) -}}
    {{- printf "(has(%s) ? %s : [])" $f $inner -}}
  {{- end -}}
{{- end -}}
{{- end -}}

{{/*
workload-clusters.celPlatformKey: a CEL expression that holds when the label or annotation key $k
is the platform's: cluster-init.dev/… or any subdomain of it (apps.cluster-init.dev/…), which
the platform's controllers select on or trust. Input: the CEL expression of the key.
*/}}
{{- define "workload-clusters.celPlatformKey" -}}
{{- printf "%s.matches('^([a-z0-9.-]*[.])?cluster-init[.]dev/')" . -}}
{{- end -}}

{{/*
workload-clusters.sourceName: the GitRepository, in the platform's namespace, of a tenant's
directory. Input: the tenant's namespace.
*/}}
{{- define "workload-clusters.sourceName" -}}{{- printf "tenant-%s" . -}}{{- end -}}

{{/*
workload-clusters.sourceSecretName: the Secret, in the platform's namespace, of the credentials of a
tenant's own repository. Input: the tenant's namespace.
*/}}
{{- define "workload-clusters.sourceSecretName" -}}{{- printf "tenant-%s-git" . -}}{{- end -}}

{{/*
workload-clusters.readersRole: the Role, in a tenant's namespace, of the tenant's people
(workload_clusters.tenants.<namespace>.readers_group).
*/}}
{{- define "workload-clusters.readersRole" -}}tenant-readers{{- end -}}

{{/*
workload-clusters.readersKubeconfigsRole: the Role, in a tenant's namespace, that lets the tenant's
people get the kubeconfig Secrets of its clusters by name, and no other Secret. The chart makes it
without rules; the placement controller sets them (internal/kubeconfigreaders), and the admission
policy cluster-init-tenant-readers admits no other rule.
*/}}
{{- define "workload-clusters.readersKubeconfigsRole" -}}tenant-readers-kubeconfigs{{- end -}}

{{/*
workload-clusters.cloudCredentialsSecret: the Secret, in a tenant's namespace, of the OpenStack
credentials its clusters are built with (CAPO's identityRef). The platform's: the builder may not
change it nor reference it from what it builds, the tenant's people may not read it. Its name has a
dot, which no cluster's name has, so that no Secret named after a cluster (<cluster>-kubeconfig,
<cluster>-credentials) is ever it.
*/}}
{{- define "workload-clusters.cloudCredentialsSecret" -}}cluster-init.openstack{{- end -}}

{{/*
workload-clusters.sourceIgnore: source-controller's ignore rules (.gitignore syntax) of a tenant's
artifact. It holds the tenant's directory at $path and nothing else, so that nothing it builds
reaches another directory; and no kustomization file anywhere, so that the directory is plain
manifests that kustomize-controller lists itself: no remote resource (kustomize fetches those
over HTTP even with --no-remote-bases, from inside the cluster, and shows what it got in the
status the tenant reads), no generator, no path out. Input: the path (./a/b/c, or ./ for all).
*/}}
{{- define "workload-clusters.sourceIgnore" -}}
{{- $lines := list -}}
{{- $dir := trimPrefix "./" (trimSuffix "/" .) -}}
{{- if and $dir (ne $dir ".") -}}
{{- $lines = append $lines "/*" -}}
{{- $parts := splitList "/" $dir -}}
{{- $prefix := "" -}}
{{- range $i, $p := $parts -}}
  {{- $prefix = printf "%s/%s" $prefix $p -}}
  {{- $lines = append $lines (printf "!%s/" $prefix) -}}
  {{- if lt $i (sub (len $parts) 1) -}}
    {{- $lines = append $lines (printf "%s/*" $prefix) -}}
  {{- end -}}
{{- end -}}
{{- end -}}
{{- $lines = concat $lines (list "kustomization.yaml" "kustomization.yml" "Kustomization") -}}
{{- join "\n" $lines -}}
{{- end -}}

{{/*
workload-clusters.infrastructureResources: the resources of the infrastructure provider objects a
tenant's clusters are made of (charts/capi-cluster), and nothing of another infrastructure.
Input: the infrastructure (capd, capo or in-memory). Output: JSON list.
*/}}
{{- define "workload-clusters.infrastructureResources" -}}
{{- if eq . "capd" -}}
{{- list "dockerclusters" "dockermachinetemplates" | toJson -}}
{{- else if eq . "in-memory" -}}
{{- list "devclusters" "devmachinetemplates" | toJson -}}
{{- else -}}
{{- list "openstackclusters" "openstackmachinetemplates" | toJson -}}
{{- end -}}
{{- end -}}

{{/*
workload-clusters.perCluster: what the platform makes in a tenant's namespace for each of its
workload clusters, counted by the namespace's ResourceQuota: the tenant's HelmRelease and the
cluster definitions' (<cluster>-cluster), the Kustomizations of the workload release's units, the
release's unit graph (<cluster>-units), and the Secrets: Helm's records of the two releases (at
most helm-controller's default history of 5, and one more while an upgrade replaces the oldest),
Cluster API's certificate authorities, service account key and kubeconfig (5), the definitions'
credentials, and a margin of 2. Each machine adds its bootstrap data Secret. A test renders a
workload cluster and checks these numbers against what it makes (internal/workloads).
*/}}
{{- define "workload-clusters.perCluster" -}}
{{- dict "helmreleases" 2 "kustomizations" 4 "configmaps" 1 "secrets" 20 | toJson -}}
{{- end -}}

{{/*
workload-clusters.perNamespace: what a tenant's namespace holds whatever its clusters: the
platform's Kustomization of its directory, its parameters and shared values, the API server's
kube-root-ca.crt, its cloud's credentials; and a margin of 5 ConfigMaps and Secrets for what other
software of the cluster puts in every namespace.
*/}}
{{- define "workload-clusters.perNamespace" -}}
{{- dict "kustomizations" 1 "configmaps" 8 "secrets" 6 | toJson -}}
{{- end -}}

{{/*
workload-clusters.shardLabel: the label that gives a Flux object to a tenants' shard
(kustomize-components/flux-shard): the platform's controllers ignore any object that has it.
Input: the shard.
*/}}
{{- define "workload-clusters.shardLabel" -}}
sharding.fluxcd.io/key: {{ . | quote }}
{{- end -}}

{{/*
workload-clusters.checkedSource: the ExternalArtifact, in a tenant's namespace, of its directory as
the platform's gate (tenant-sources, internal/tenantsources) checked it: what its Kustomization
reads.
*/}}
{{- define "workload-clusters.checkedSource" -}}workload-clusters{{- end -}}
