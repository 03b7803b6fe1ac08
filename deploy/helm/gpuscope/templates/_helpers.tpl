{{- define "gpuscope.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpuscope.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gpuscope.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpuscope.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gpuscope.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "gpuscope.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "gpuscope.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "gpuscope.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "gpuscope.webConfigSecret" -}}
{{- if .Values.webConfig.existingSecret -}}
{{- .Values.webConfig.existingSecret -}}
{{- else -}}
{{- printf "%s-web-config" (include "gpuscope.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "gpuscope.webConfigEnabled" -}}
{{- if or .Values.webConfig.existingSecret .Values.webConfig.config .Values.tlsServerConfig.enabled .Values.basicAuth.users -}}true{{- end -}}
{{- end -}}

{{/* Relabelings shared by the ServiceMonitor and the PodMonitor: the
target's pod, namespace and container name the exporter pod, and would
otherwise collide with gpuscope's labels for the GPU's workload. */}}
{{- define "gpuscope.dropTargetPodLabels" -}}
- action: labeldrop
  regex: (pod|namespace|container)
{{- end -}}

{{/* Pod labels from the API server: only with pod attribution, whose pods
they label. */}}
{{- define "gpuscope.podLabelsEnabled" -}}
{{- if include "gpuscope.podLabelsExpr" . -}}
{{- if not .Values.kubernetes.enabled -}}
{{- fail "kubernetes.podLabels.allowlist (or kubernetes.enablePodLabels) needs kubernetes.enabled" -}}
{{- end -}}
{{- if and .Values.kubernetes.podLabels.allowlist .Values.kubernetes.enablePodLabels -}}
{{- fail "kubernetes.podLabels.allowlist and kubernetes.enablePodLabels both choose pod labels; give one" -}}
{{- end -}}
true
{{- end -}}
{{- end -}}

{{/* dcgm-exporter's chart values are accepted as aliases of gpuscope's, so
its values file renders unchanged (deployment/values.yaml of dcgm-exporter
d5e5f51). Each helper below gives the effective value: dcgm-exporter's key
where the operator set it, else gpuscope's. */}}

{{- define "gpuscope.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{/* service.enable (dcgm-exporter) or service.enabled. */}}
{{- define "gpuscope.serviceEnabled" -}}
{{- if hasKey .Values.service "enable" -}}
{{- if .Values.service.enable -}}true{{- end -}}
{{- else if .Values.service.enabled -}}true{{- end -}}
{{- end -}}

{{/* kubeletPath (dcgm-exporter) or kubernetes.podResourcesDir. */}}
{{- define "gpuscope.podResourcesDir" -}}
{{- default .Values.kubernetes.podResourcesDir .Values.kubeletPath -}}
{{- end -}}

{{/* kubernetes.enablePodUID (dcgm-exporter) or kubernetes.podUIDLabel. */}}
{{- define "gpuscope.podUID" -}}
{{- if or .Values.kubernetes.podUIDLabel .Values.kubernetes.enablePodUID -}}true{{- end -}}
{{- end -}}

{{/* The --kubernetes-pod-labels expression: kubernetes.podLabels.allowlist,
or dcgm-exporter's kubernetes.enablePodLabels with its
podLabelAllowlistRegex list (a pattern matching anywhere in the key keeps
the label; no pattern keeps all), as the exporter's flags translate it. */}}
{{- define "gpuscope.podLabelsExpr" -}}
{{- if .Values.kubernetes.podLabels.allowlist -}}
{{- .Values.kubernetes.podLabels.allowlist -}}
{{- else if .Values.kubernetes.enablePodLabels -}}
{{- if .Values.kubernetes.podLabelAllowlistRegex -}}
{{- $alts := list -}}
{{- range .Values.kubernetes.podLabelAllowlistRegex -}}
{{- $alts = append $alts (printf ".*(?:%s).*" .) -}}
{{- end -}}
{{- join "|" $alts -}}
{{- else -}}
.*
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The listen address: dcgm-exporter's service.address, else the port. */}}
{{- define "gpuscope.address" -}}
{{- default (printf ":%v" .Values.service.port) .Values.service.address -}}
{{- end -}}

{{/* The container port: the port of the listen address. */}}
{{- define "gpuscope.containerPort" -}}
{{- $a := include "gpuscope.address" . -}}
{{- last (splitList ":" $a) -}}
{{- end -}}

{{/* A web config: gpuscope's webConfig, or dcgm-exporter's tlsServerConfig
and basicAuth, from which the chart writes one. */}}
{{- define "gpuscope.tlsEnabled" -}}
{{- if .Values.tlsServerConfig.enabled -}}true{{- end -}}
{{- end -}}

{{- define "gpuscope.tlsSecret" -}}
{{- if .Values.tlsServerConfig.existingSecret -}}
{{- .Values.tlsServerConfig.existingSecret -}}
{{- else -}}
{{- printf "%s-tls" (include "gpuscope.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "gpuscope.generatedWebConfig" -}}
{{- if .Values.tlsServerConfig.enabled }}
tls_server_config:
  cert_file: {{ printf "/etc/gpuscope/tls/%s" .Values.tlsServerConfig.certFilename | quote }}
  key_file: {{ printf "/etc/gpuscope/tls/%s" .Values.tlsServerConfig.keyFilename | quote }}
  {{- if .Values.tlsServerConfig.clientAuthType }}
  client_auth_type: {{ .Values.tlsServerConfig.clientAuthType }}
  client_ca_file: {{ printf "/etc/gpuscope/tls/%s" .Values.tlsServerConfig.caFilename | quote }}
  {{- end }}
{{- end }}
{{- if .Values.basicAuth.users }}
basic_auth_users:
  {{- range $user, $password := .Values.basicAuth.users }}
  {{ $user }}: {{ (split ":" (htpasswd $user $password))._1 | quote }}
  {{- end }}
{{- end }}
{{- end -}}

{{/* The web config's content when the chart writes the Secret. */}}
{{- define "gpuscope.webConfigContent" -}}
{{- if .Values.webConfig.config -}}
{{- if or .Values.tlsServerConfig.enabled .Values.basicAuth.users -}}
{{- fail "webConfig.config and tlsServerConfig/basicAuth both configure TLS and basic auth; give one" -}}
{{- end -}}
{{- .Values.webConfig.config -}}
{{- else -}}
{{- include "gpuscope.generatedWebConfig" . | trim -}}
{{- end -}}
{{- end -}}

{{/* Refuses the dcgm-exporter keys that have no meaning here, naming the
replacement. */}}
{{- define "gpuscope.refuseUnsupported" -}}
{{- if .Values.serviceMonitor.apiVersion -}}
{{- if ne .Values.serviceMonitor.apiVersion "monitoring.coreos.com/v1" -}}
{{- fail (printf "serviceMonitor.apiVersion %q: only monitoring.coreos.com/v1 is rendered" .Values.serviceMonitor.apiVersion) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The counters CSV: counters.csv, dcgm-exporter's customMetrics, or the
shipped file: etc/dcp-metrics.csv (the default set plus the profiling fields)
with counters.profiling, else etc/default-counters.csv without its
DCGM_FI_PROF_* lines, which the host engine cannot read without
CAP_SYS_ADMIN (each would be reported unsupported on every GPU). */}}
{{- define "gpuscope.countersCSV" -}}
{{- if .Values.counters.csv -}}
{{- .Values.counters.csv -}}
{{- else if .Values.customMetrics -}}
{{- .Values.customMetrics -}}
{{- else if .Values.counters.profiling -}}
{{- .Files.Get "files/dcp-metrics.csv" -}}
{{- else -}}
{{- $kept := list "# counters.profiling is false: the DCGM_FI_PROF_* fields of etc/default-counters.csv are left out." -}}
{{- range splitList "\n" (.Files.Get "files/default-counters.csv") -}}
{{- if not (hasPrefix "DCGM_FI_PROF_" (trim .)) -}}
{{- $kept = append $kept . -}}
{{- end -}}
{{- end -}}
{{- join "\n" $kept -}}
{{- end -}}
{{- end -}}

{{/* Probe timing: dcgm-exporter's livenessProbe/readinessProbe values
(initialDelaySeconds, periodSeconds) where set, else the chart's. Called
with (list values defaultDelay defaultPeriod). */}}
{{- define "gpuscope.probeTiming" -}}
{{- $v := index . 0 | default dict -}}
{{- $delay := index . 1 -}}
{{- $period := index . 2 -}}
{{- $d := dig "initialDelaySeconds" $delay $v -}}
{{- if $d }}
initialDelaySeconds: {{ $d }}
{{- end }}
periodSeconds: {{ dig "periodSeconds" $period $v }}
{{- end -}}

{{/* The image. dcgm-exporter's values file names its own image
(nvcr.io/nvidia/k8s/dcgm-exporter); that image is not gpuscope, so it is
replaced by gpuscope's at the chart's appVersion, and NOTES.txt says so. */}}
{{- define "gpuscope.dcgmExporterImage" -}}
{{- if contains "dcgm-exporter" .Values.image.repository -}}true{{- end -}}
{{- end -}}

{{- define "gpuscope.image" -}}
{{- if include "gpuscope.dcgmExporterImage" . -}}
{{- printf "ghcr.io/gpuscope/gpuscope:%s" .Chart.AppVersion -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* Whether to render a Prometheus Operator object: called with (list .
KIND VALUE), VALUE being true, false or auto. auto renders it when the
cluster serves KIND of monitoring.coreos.com/v1. Helm lists a served API as
group/version and as group/version/Kind; `helm template --api-versions
monitoring.coreos.com/v1` names the group alone, which then stands for all
its kinds. A cluster with some of the Operator's CRDs and not others (an
agent that brings ServiceMonitor and PodMonitor only) lists those kinds, so
the others are left out. */}}
{{- define "gpuscope.operatorObject" -}}
{{- $ctx := index . 0 -}}
{{- $kind := index . 1 -}}
{{- $value := toString (index . 2) -}}
{{- if eq $value "true" -}}
true
{{- else if eq $value "auto" -}}
{{- $apis := $ctx.Capabilities.APIVersions -}}
{{- if $apis.Has (printf "monitoring.coreos.com/v1/%s" $kind) -}}
true
{{- else if $apis.Has "monitoring.coreos.com/v1" -}}
{{- $kinds := false -}}
{{- range $apis -}}
{{- if hasPrefix "monitoring.coreos.com/v1/" . -}}
{{- $kinds = true -}}
{{- end -}}
{{- end -}}
{{- if not $kinds -}}
true
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gpuscope.serviceMonitorEnabled" -}}
{{- if include "gpuscope.operatorObject" (list . "ServiceMonitor" .Values.serviceMonitor.enabled) -}}
{{- if include "gpuscope.serviceEnabled" . -}}
true
{{- else if eq (toString .Values.serviceMonitor.enabled) "true" -}}
{{- fail "serviceMonitor.enabled needs service.enabled (or use podMonitor.enabled)" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gpuscope.podMonitorEnabled" -}}
{{- include "gpuscope.operatorObject" (list . "PodMonitor" .Values.podMonitor.enabled) -}}
{{- end -}}

{{- define "gpuscope.prometheusRuleEnabled" -}}
{{- include "gpuscope.operatorObject" (list . "PrometheusRule" .Values.prometheusRule.enabled) -}}
{{- end -}}

{{/* The rules ConfigMap: forced, or by default wherever the rules are
wanted and no PrometheusRule carries them. */}}
{{- define "gpuscope.rulesConfigMapEnabled" -}}
{{- $cm := toString .Values.prometheusRule.configMap -}}
{{- if eq $cm "true" -}}
true
{{- else if and (eq $cm "auto") (ne (toString .Values.prometheusRule.enabled) "false") (not (include "gpuscope.prometheusRuleEnabled" .)) -}}
true
{{- end -}}
{{- end -}}

{{/* The rule groups of files/prometheus (a link to deploy/prometheus), for
the PrometheusRule. */}}
{{- define "gpuscope.ruleGroups" -}}
{{- $groups := list -}}
{{- range $path, $_ := .Files.Glob "files/prometheus/*.yml" -}}
{{- $doc := $.Files.Get $path | fromYaml -}}
{{- if hasKey $doc "Error" -}}
{{- fail (printf "%s: %s" $path $doc.Error) -}}
{{- end -}}
{{- $groups = concat $groups ($doc.groups | default list) -}}
{{- end -}}
{{- with include "gpuscope.priceGroups" . -}}
{{- $groups = concat $groups (fromYamlArray .) -}}
{{- end -}}
{{- toYaml $groups -}}
{{- end -}}

{{/* The prices of prometheusRule.pricePerGPUHour as recording rules, one
series model:gpuscope_price_per_gpu_hour:value{modelName} per model, which
the gpuscope.cost group of gpuscope-recording.yml multiplies GPU-hours by.
Empty without prices: the cost rules then record nothing. */}}
{{- define "gpuscope.priceGroups" -}}
{{- $rules := list -}}
{{- range $model, $price := .Values.prometheusRule.pricePerGPUHour -}}
{{- $rules = append $rules (dict "record" "model:gpuscope_price_per_gpu_hour:value" "expr" (printf "vector(%v)" $price) "labels" (dict "modelName" $model)) -}}
{{- end -}}
{{- if $rules -}}
{{- toYaml (list (dict "name" "gpuscope.prices" "interval" "1m" "rules" $rules)) -}}
{{- end -}}
{{- end -}}

{{/* Insight reads the profiling fields, so it runs only with them: one
value, counters.profiling=false, turns off everything that needs
CAP_SYS_ADMIN. */}}
{{- define "gpuscope.insightEnabled" -}}
{{- if and .Values.insight.enabled .Values.counters.profiling -}}true{{- end -}}
{{- end -}}
