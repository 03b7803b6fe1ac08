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
{{- if or .Values.webConfig.existingSecret .Values.webConfig.config -}}true{{- end -}}
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
{{- if .Values.kubernetes.podLabels.allowlist -}}
{{- if not .Values.kubernetes.enabled -}}
{{- fail "kubernetes.podLabels.allowlist needs kubernetes.enabled" -}}
{{- end -}}
true
{{- end -}}
{{- end -}}
