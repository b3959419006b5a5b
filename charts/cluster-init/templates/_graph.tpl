{{/*
cluster-init.graph checks the units and resolves their dependencies. It fails, naming the values
key, on: a unit that is not a map, an unknown context, a unit with neither a kustomization path nor
a chart (or both), a dependency on an unknown unit, and a dependency cycle among enabled units.
A dependency on a disabled unit is dropped (and listed under "dropped"). Two enabled units with the
same role fail too: Go finds a unit by its role (release, cluster, pivot), never by its name.
Output: JSON {"units": {name: {...}}, "order": [enabled unit names, dependencies first]}.
*/}}
{{- define "cluster-init.graph" -}}
{{- $root := . -}}
{{- $knownContexts := list "bootstrap" "management" "workload" -}}
{{- if not (has $root.Values.context $knownContexts) -}}
  {{- fail (printf "context: unknown context %q, expected one of %s" $root.Values.context (join ", " $knownContexts)) -}}
{{- end -}}
{{- $names := keys $root.Values.units | sortAlpha -}}
{{- $units := dict -}}
{{- range $name := $names -}}
  {{- $u := index $root.Values.units $name -}}
  {{- if not (kindIs "map" $u) -}}
    {{- fail (printf "units.%s: expected a map of unit fields, got %s" $name (kindOf $u)) -}}
  {{- end -}}
  {{- range $c := $u.contexts | default list -}}
    {{- if not (has $c $knownContexts) -}}
      {{- fail (printf "units.%s.contexts: unknown context %q, expected some of %s" $name $c (join ", " $knownContexts)) -}}
    {{- end -}}
  {{- end -}}
  {{- $path := tpl (dig "kustomization_spec" "path" "" $u) $root -}}
  {{- $chart := tpl (dig "helmrelease_spec" "chart" "spec" "chart" "" $u) $root -}}
  {{- if and (not $path) (not $chart) -}}
    {{- fail (printf "units.%s: has neither kustomization_spec.path nor helmrelease_spec.chart.spec.chart (is %q a misspelt unit name? units: %s)" $name $name (join ", " $names)) -}}
  {{- end -}}
  {{- if and $path $chart -}}
    {{- fail (printf "units.%s: has both kustomization_spec.path and helmrelease_spec.chart.spec.chart, expected one" $name) -}}
  {{- end -}}
  {{- $state := fromJson (include "cluster-init.unitState" (list $root $name)) -}}
  {{- $deps := list -}}
  {{- $applied := list -}}
  {{- $dropped := list -}}
  {{- $dependsOn := $u.depends_on | default dict -}}
  {{- if not (kindIs "map" $dependsOn) -}}
    {{- fail (printf "units.%s.depends_on: expected a map of unit name to bool or template, got %s" $name (kindOf $dependsOn)) -}}
  {{- end -}}
  {{- range $dep := keys $dependsOn | sortAlpha -}}
    {{- if not (hasKey $root.Values.units $dep) -}}
      {{- fail (printf "units.%s.depends_on.%s: unknown unit %q (units: %s)" $name $dep $dep (join ", " $names)) -}}
    {{- end -}}
    {{- $raw := index $dependsOn $dep -}}
    {{- /* "applied": the unit needs the dependency's objects applied (its CRDs), not ready. */ -}}
    {{- $onApply := and (kindIs "string" $raw) (eq $raw "applied") -}}
    {{- if and (kindIs "string" $raw) (not $onApply) (not (contains "{{" $raw)) -}}
      {{- fail (printf "units.%s.depends_on.%s: expected true, false, applied or a template, got %q" $name $dep $raw) -}}
    {{- end -}}
    {{- $want := dict "value" true -}}
    {{- if not $onApply -}}
      {{- $want = fromJson (include "cluster-init.condition" (list $root $raw (printf "units.%s.depends_on.%s" $name $dep))) -}}
    {{- end -}}
    {{- if $want.value -}}
      {{- if (fromJson (include "cluster-init.unitState" (list $root $dep))).enabled -}}
        {{- $deps = append $deps $dep -}}
        {{- if $onApply -}}{{- $applied = append $applied $dep -}}{{- end -}}
      {{- else -}}
        {{- $dropped = append $dropped $dep -}}
      {{- end -}}
    {{- end -}}
  {{- end -}}
  {{- $kind := ternary "helmrelease" "kustomization" (ne $chart "") -}}
  {{- $_ := set $units $name (dict
        "enabled" $state.enabled
        "reason" $state.reason
        "description" (dig "info" "description" "" $u)
        "help" (tpl (dig "info" "help" "" $u) $root | trim)
        "contexts" ($u.contexts | default $knownContexts)
        "depends_on" $deps
        "applied_deps" $applied
        "dropped" $dropped
        "kind" $kind
        "path" $path
        "chart" $chart
        "kubeconfig" (hasKey $u "kubeconfig")
        "object" (include "cluster-init.unitObject" (list $root $name))
        "role" ($u.role | default "")
        "suspend_for_pivot" ($u.suspend_for_pivot | default false)
        "timeout" ($u.timeout | default $root.Values.unit_defaults.timeout)) -}}
{{- end -}}
{{- $roles := dict -}}
{{- range $name := $names -}}
  {{- $g := index $units $name -}}
  {{- if and $g.enabled $g.role -}}
    {{- if hasKey $roles $g.role -}}
      {{- fail (printf "units.%s.role: unit %s has role %q already, expected one enabled unit per role" $name (index $roles $g.role) $g.role) -}}
    {{- end -}}
    {{- $_ := set $roles $g.role $name -}}
  {{- end -}}
{{- end -}}
{{- /* Kahn's algorithm over the enabled units: what is left after len(units) rounds is in a cycle. */ -}}
{{- $enabled := list -}}
{{- range $name := $names -}}
  {{- if (index $units $name).enabled -}}{{- $enabled = append $enabled $name -}}{{- end -}}
{{- end -}}
{{- $done := dict -}}
{{- $order := list -}}
{{- range $round := until (len $enabled) -}}
  {{- range $name := $enabled -}}
    {{- if not (hasKey $done $name) -}}
      {{- $ready := true -}}
      {{- range $dep := (index $units $name).depends_on -}}
        {{- if not (hasKey $done $dep) -}}{{- $ready = false -}}{{- end -}}
      {{- end -}}
      {{- if $ready -}}
        {{- $_ := set $done $name true -}}
        {{- $order = append $order $name -}}
      {{- end -}}
    {{- end -}}
  {{- end -}}
{{- end -}}
{{- if lt (len $order) (len $enabled) -}}
  {{- /* Walk from a unit left over, always to a left-over dependency, until a unit repeats. */ -}}
  {{- $start := "" -}}
  {{- range $name := $enabled -}}
    {{- if and (not $start) (not (hasKey $done $name)) -}}{{- $start = $name -}}{{- end -}}
  {{- end -}}
  {{- $path := list $start -}}
  {{- $cur := $start -}}
  {{- $closed := false -}}
  {{- range $step := until (len $enabled) -}}
    {{- if not $closed -}}
      {{- $next := "" -}}
      {{- range $dep := (index $units $cur).depends_on -}}
        {{- if and (not $next) (not (hasKey $done $dep)) -}}{{- $next = $dep -}}{{- end -}}
      {{- end -}}
      {{- if has $next $path -}}{{- $closed = true -}}{{- end -}}
      {{- $path = append $path $next -}}
      {{- $cur = $next -}}
    {{- end -}}
  {{- end -}}
  {{- /* Print only the loop itself: from the first occurrence of the repeated unit to its repetition. */ -}}
  {{- $last := last $path -}}
  {{- $loop := list -}}
  {{- $in := false -}}
  {{- range $p := $path -}}
    {{- if and (not $in) (eq $p $last) -}}{{- $in = true -}}{{- end -}}
    {{- if $in -}}{{- $loop = append $loop $p -}}{{- end -}}
  {{- end -}}
  {{- fail (printf "units.%s.depends_on: dependency cycle: %s" (first $loop) (join " -> " $loop)) -}}
{{- end -}}
{{- dict "units" $units "order" $order | toJson -}}
{{- end -}}

{{/*
cluster-init.checkProviders fails on a provider name that no unit implements.
*/}}
{{- define "cluster-init.checkProviders" -}}
{{- $p := .Values.cluster.providers -}}
{{- $bootstrap := list "kubeadm" "rke2" -}}
{{- $infra := list "capd" "capo" -}}
{{- if not (has $p.bootstrap $bootstrap) -}}
  {{- fail (printf "cluster.providers.bootstrap: unknown provider %q, expected one of %s" $p.bootstrap (join ", " $bootstrap)) -}}
{{- end -}}
{{- if eq .Values.context "workload" -}}
  {{- $infra = append $infra "in-memory" -}}
{{- end -}}
{{- if and (eq $p.infrastructure "in-memory") (ne .Values.context "workload") -}}
  {{- fail "cluster.providers.infrastructure: in-memory simulates a tenant's workload clusters (workload_clusters.tenants.<namespace>.infrastructure), expected capd or capo for the cluster of an environment" -}}
{{- end -}}
{{- if not (has $p.infrastructure $infra) -}}
  {{- fail (printf "cluster.providers.infrastructure: unknown provider %q, expected one of %s" $p.infrastructure (join ", " $infra)) -}}
{{- end -}}
{{- end -}}
