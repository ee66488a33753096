{{/* Chart name, truncated to the 63 characters a label allows. */}}
{{- define "triage-bot.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: release-chart, unless the release name already contains the chart name. */}}
{{- define "triage-bot.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "triage-bot.selectorLabels" -}}
app.kubernetes.io/name: {{ include "triage-bot.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "triage-bot.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "triage-bot.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "triage-bot.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "triage-bot.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "triage-bot.secretName" -}}
{{- default (include "triage-bot.fullname" .) .Values.existingSecret }}
{{- end }}

{{- define "triage-bot.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "triage-bot.sqlitePath" -}}
/data/triage.db
{{- end }}

{{- define "triage-bot.claimName" -}}
{{- default (printf "%s-data" (include "triage-bot.fullname" .)) .Values.database.sqlite.existingClaim }}
{{- end }}

{{/* Refuse combinations that would corrupt data or silently do nothing. */}}
{{- define "triage-bot.validate" -}}
{{- if and (eq .Values.database.type "sqlite") (gt (int .Values.replicaCount) 1) }}
{{- fail (printf "replicaCount=%d needs PostgreSQL: SQLite is a single-writer file on a ReadWriteOnce volume, so replicas would fight over it. Set database.type=postgresql and put a postgresql+psycopg:// URL under key %q of Secret %q, or set replicaCount=1." (int .Values.replicaCount) .Values.secretKeys.databaseUrl (include "triage-bot.secretName" .)) }}
{{- end }}
{{- if and .Values.ingress.enabled (eq .Values.mode "socket") }}
{{- fail "ingress.enabled=true with mode=socket: Socket Mode dials out to Slack and needs no inbound route. Set ingress.enabled=false, or mode=http." }}
{{- end }}
{{- if le (float64 .Values.terminationGracePeriodSeconds) (float64 .Values.config.snapshotDeadlineSeconds) }}
{{- fail (printf "terminationGracePeriodSeconds=%v must exceed config.snapshotDeadlineSeconds=%v: on shutdown an in-flight snapshot needs its whole deadline to finish (or be recorded as interrupted) before Kubernetes kills the pod." .Values.terminationGracePeriodSeconds .Values.config.snapshotDeadlineSeconds) }}
{{- end }}
{{- if .Values.alerts.enabled }}
{{- range .Values.alerts.routing.rules }}
{{- if and (eq (default "record" .action) "open") (empty .channel) (empty $.Values.alerts.routing.channel) }}
{{- fail (printf "alerts.routing.rules %q opens incidents but names no channel: set its channel, or alerts.routing.channel (a Slack channel id such as C0123ABCD)." .name) }}
{{- end }}
{{- end }}
{{- end }}
{{- if and .Values.rbac.create .Values.rbac.namespaced (empty .Values.rbac.namespaces) }}
{{- fail "rbac.namespaced=true needs rbac.namespaces: list the namespaces the bot may read, e.g. --set 'rbac.namespaces={ml-train,perf}'." }}
{{- end }}
{{- end }}

{{/* Environment shared by the bot container and the migration job. */}}
{{- define "triage-bot.validateNodeProbe" -}}
{{- if and (eq .Values.nodeProbe.runner "k8s-debug") (not .Values.nodeProbe.image) }}
{{- fail "nodeProbe.runner=k8s-debug needs nodeProbe.image: the image of the one-shot probe pod (with ibstat / nvidia-smi)." }}
{{- end }}
{{- end }}

{{- define "triage-bot.databaseEnv" -}}
{{- if eq .Values.database.type "postgresql" }}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "triage-bot.secretName" . }}
      key: {{ .Values.secretKeys.databaseUrl }}
{{- else }}
- name: DATABASE_URL
  value: "sqlite:///{{ include "triage-bot.sqlitePath" . }}"
{{- end }}
{{- end }}

{{/* The container security settings every container of the chart uses. */}}
{{- define "triage-bot.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
privileged: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "triage-bot.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: {{ .Values.fsGroup }}
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/*
The read-only rules the collectors need: get/list/watch only, never secrets, never pods/exec.
tests/helm/test_rbac_matches_collectors.py checks these against the API calls the collectors make.
*/}}
{{- define "triage-bot.readRules" -}}
- apiGroups: [""]
  resources: ["pods", "pods/log", "events"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["batch"]
  resources: ["jobs", "cronjobs"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["apps"]
  resources: ["deployments", "replicasets", "statefulsets", "daemonsets"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["jobset.x-k8s.io"]
  resources: ["jobsets"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["kubeflow.org"]
  resources: ["pytorchjobs", "mpijobs", "tfjobs", "xgboostjobs", "paddlejobs", "jaxjobs"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["leaderworkerset.x-k8s.io"]
  resources: ["leaderworkersets"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["ray.io"]
  resources: ["rayjobs", "rayclusters"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["serving.kserve.io"]
  resources: ["inferenceservices"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["batch.volcano.sh"]
  resources: ["jobs"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["kueue.x-k8s.io"]
  resources: ["workloads"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["aiperf.nvidia.com"]
  resources: ["aiperfjobs"]
  verbs: ["get", "list", "watch"]
{{- range .Values.rbac.extraReadResources }}
- apiGroups: [{{ .apiGroup | quote }}]
  resources: {{ .resources | toJson }}
  verbs: ["get", "list", "watch"]
{{- end }}
{{- end }}

{{- define "triage-bot.clusterScopedRules" -}}
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["karpenter.sh"]
  resources: ["nodeclaims"]
  verbs: ["get", "list", "watch"]
{{- end }}

{{/* Whether named clusters are configured (clusters.inCluster or clusters.remote). */}}
{{- define "triage-bot.namedClusters" -}}
{{- if or .Values.clusters.inCluster .Values.clusters.remote }}true{{- end }}
{{- end }}

{{/* The TRIAGE_CLUSTERS_FILE document: paths point at the Secret volumes the Deployment mounts. */}}
{{- define "triage-bot.clustersFile" -}}
{{- $list := list }}
{{- with .Values.clusters.inCluster }}
{{- $list = append $list (dict "name" . "kubernetes" (dict "in_cluster" true)) }}
{{- end }}
{{- range .Values.clusters.remote }}
{{- $entry := dict "name" .name }}
{{- if .kubernetes }}
{{- $access := dict "kubeconfig" (printf "/etc/triage/clusters/%s/kubeconfig" .name) }}
{{- with .kubernetes.context }}{{- $_ := set $access "context" . }}{{- end }}
{{- $_ := set $entry "kubernetes" $access }}
{{- else }}
{{- $access := dict "backend" "rest" "url" .slurm.url "token_file" (printf "/etc/triage/clusters/%s/token" .name) }}
{{- with .slurm.user }}{{- $_ := set $access "user" . }}{{- end }}
{{- $_ := set $entry "slurm" $access }}
{{- end }}
{{- if .default }}{{- $_ := set $entry "default" true }}{{- end }}
{{- with .maxSnapshots }}{{- $_ := set $entry "max_snapshots" . }}{{- end }}
{{- with .bounds }}{{- $_ := set $entry "bounds" . }}{{- end }}
{{- $list = append $list $entry }}
{{- end }}
{{- toYaml (dict "clusters" $list) }}
{{- end }}
