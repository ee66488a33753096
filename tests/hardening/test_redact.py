"""Collected evidence is redacted before it is stored or posted: nothing secret survives, the rest does."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.evidence import findings, redact, report

NOW = datetime(2026, 11, 29, 22, 0, tzinfo=UTC)

# Real-looking, never real: vendor example keys and random-looking bodies of the right shape.
SLACK_BOT_TOKEN = "xoxb-2712345678901-5123456789012-Qm8T3vKx9LpR2sWzYb4NcJ7d"
SLACK_APP_TOKEN = "xapp-1-A07B1C2D3E4-6712345678901-9f8e7d6c5b4a39281706f5e4d3c2b1a0"
GITHUB_TOKEN = "ghp_R8kT2mVx9QwLp4ZsYb7NcJ3dHf6GaE1uXo5W"
GITHUB_PAT = "github_pat_11ABCDEFG0aBcDeFgHiJkL_mNoPqRsTuVwXyZ0123456789aBcDeFgHiJkLmNoPqRsTuV"
HF_TOKEN = "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"
AWS_ACCESS_KEY = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
GOOGLE_API_KEY = "AIzaSyD4x9Qm2Lk7Vt8Rw3Np5Zb6Yc1Jh0Gf-Ea"
JWT = (
    "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEyMyJ9"
    ".eyJpc3MiOiJrdWJlcm5ldGVzL3NlcnZpY2VhY2NvdW50Iiwic3ViIjoic3lzdGVtOnNhOm1sOmRlZmF1bHQifQ"
    ".Qm8T3vKx9LpR2sWzYb4NcJ7dHf6GaE1uXo5WkT2mVx9QwLp4Zs"
)
BEARER = "a7F3kQ9zL2mX8vB4nC6pD1sR5tY0wE"
PEM_BODY_LINE = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj"
PEM_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    f"{PEM_BODY_LINE}\n"
    "MZx4y2UrLq0Fj6rO3vW8sN1bT5hK7gE9aQ2cD4fH6jL8mP0rS2uV4xZ6\n"
    "-----END RSA PRIVATE KEY-----"
)

LEAKY_SAMPLES: list[tuple[str, str, tuple[str, ...]]] = [
    ("slack bot token in a log line", f"posting with token {SLACK_BOT_TOKEN} failed", (SLACK_BOT_TOKEN,)),
    ("slack app token in env output", f"SLACK_APP_TOKEN={SLACK_APP_TOKEN}", (SLACK_APP_TOKEN,)),
    (
        "github token in a git remote",
        f"fatal: https://{GITHUB_TOKEN}@github.com/org/repo.git",
        (GITHUB_TOKEN,),
    ),
    ("github fine-grained token", f"using {GITHUB_PAT}", (GITHUB_PAT,)),
    ("hugging face token in a launcher log", f"huggingface-cli login --token {HF_TOKEN}", (HF_TOKEN,)),
    (
        "aws keys in a credentials file",
        f"[default]\naws_access_key_id = {AWS_ACCESS_KEY}\naws_secret_access_key = {AWS_SECRET_KEY}\n",
        (AWS_ACCESS_KEY, AWS_SECRET_KEY),
    ),
    ("aws secret key alone in a line", f"restored {AWS_SECRET_KEY} from vault", (AWS_SECRET_KEY,)),
    ("google api key in a url", f"GET https://maps.googleapis.com/x?key={GOOGLE_API_KEY}", (GOOGLE_API_KEY,)),
    ("jwt from slurmrestd", f"X-SLURM-USER-TOKEN: {JWT}", (JWT, JWT.split(".")[1])),
    ("authorization header", f"Authorization: Bearer {BEARER}\nAccept: */*", (BEARER,)),
    ("curl header in a command", f"curl -H 'Authorization: Bearer {BEARER}' https://api", (BEARER,)),
    ("basic auth header", "authorization: Basic dXNlcjpodW50ZXIyaHVudGVyMg==", ("dXNlcjpodW50ZXIy",)),
    ("bare bearer token in prose", f"retrying with bearer {BEARER}", (BEARER,)),
    (
        "password in a database url",
        "DATABASE_URL=postgresql://triage:Tr1ag3-pw!@db:5432/triage",
        ("Tr1ag3-pw!",),
    ),
    (
        "password in a redis url without user",
        "connecting to redis://:s3cr3tRedis@cache:6379/0",
        ("s3cr3tRedis",),
    ),
    ("password as key=value", "mysql --user=root --password=hunter2hunter2 -h db", ("hunter2hunter2",)),
    ("password flag with a space", "mlflow server --password Winter2026! --port 5000", ("Winter2026!",)),
    ("secret in yaml", "stringData:\n  client_secret: Zx81-kq-Pp0oW\n  user: bot\n", ("Zx81-kq-Pp0oW",)),
    (
        "api key in json",
        '{"wandb": {"api_key": "0f4e6c2d9b7a81e3c5d4"}, "project": "llm"}',
        ("0f4e6c2d9b7a81e3c5d4",),
    ),
    ("token in a query string", "GET /metrics?access_token=qwertyuiop1234&page=2", ("qwertyuiop1234",)),
    (
        "presigned s3 url",
        "https://b.s3.amazonaws.com/ckpt?X-Amz-Signature=9f8e7d6c5b4a&X-Amz-Expires=60",
        ("9f8e7d6c5b4a",),
    ),
    ("cookie header", "Cookie: session=9f8e7d6c5b4a3928; theme=dark", ("9f8e7d6c5b4a3928",)),
    (
        "kubernetes env var in pod json",
        '"env": [{"name": "DB_PASSWORD", "value": "pa55-w0rd"}, {"name": "MODE", "value": "train"}]',
        ("pa55-w0rd",),
    ),
    (
        "kubernetes env var in pod yaml",
        "    env:\n    - name: HF_HUB_TOKEN\n      value: plain-but-secret-value\n    - name: MODE\n      value: train\n",
        ("plain-but-secret-value",),
    ),
    ("kubectl describe env", "    Environment:\n      WANDB_API_KEY:  0123abcd4567ef\n", ("0123abcd4567ef",)),
    ("pem private key, multi-line", f"key material:\n{PEM_KEY}\nnext line", (PEM_BODY_LINE, "MZx4y2Ur")),
    (
        "pem key cut short by the evidence cap",
        f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY_LINE}\nMZx4",
        (PEM_BODY_LINE,),
    ),
    (
        "gcp service account json",
        '{"type": "service_account", "project_id": "ml-prod", "private_key_id": "1a2b3c",'
        ' "private_key": "-----BEGIN PRIVATE KEY-----\\n'
        + PEM_BODY_LINE
        + '\\n-----END PRIVATE KEY-----\\n",'
        ' "client_email": "triage@ml-prod.iam.gserviceaccount.com"}',
        (PEM_BODY_LINE,),
    ),
    (
        "slack webhook url",
        "notify https://hooks.slack.com/services/T0123ABCD/B0456EFGH/aBcDeFgHiJkLmNoPqRsTuVwX",
        ("aBcDeFgHiJkLmNoPqRsTuVwX",),
    ),
]


@pytest.mark.parametrize(
    ("text", "secrets"), [(s[1], s[2]) for s in LEAKY_SAMPLES], ids=[s[0] for s in LEAKY_SAMPLES]
)
def test_no_secret_survives_redaction(text: str, secrets: tuple[str, ...]) -> None:
    cleaned = redact.redact_text(text)
    for secret in secrets:
        assert secret not in cleaned
    assert redact.REDACTED in cleaned


def test_a_pem_block_is_removed_whole_and_the_lines_around_it_kept() -> None:
    cleaned = redact.redact_text(f"key material:\n{PEM_KEY}\nnext line")
    assert cleaned == f"key material:\n{redact.REDACTED}\nnext line"


def test_context_around_a_secret_is_kept_for_the_responder() -> None:
    cleaned = redact.redact_text("mysql --user=root --password=hunter2hunter2 -h db")
    assert cleaned == f"mysql --user=root --password={redact.REDACTED} -h db"


def test_json_stays_valid_json_after_redaction() -> None:
    import json

    sample = next(s[1] for s in LEAKY_SAMPLES if s[0] == "gcp service account json")
    parsed = json.loads(redact.redact_text(sample))
    assert parsed["private_key"].strip() == redact.REDACTED
    assert parsed["client_email"] == "triage@ml-prod.iam.gserviceaccount.com"


INNOCUOUS = [
    "NAME                READY   STATUS             RESTARTS      AGE\ntrain-7-worker-0    0/1     CrashLoopBackOff   5 (30s ago)   4m",
    "0/8 nodes are available: 8 Insufficient nvidia.com/gpu. preemption: 0/8 nodes are available.",
    'MountVolume.SetUp failed for volume "creds" : secret "hf-token" not found',
    "secretName: hf-token",
    "valueFrom:\n  secretKeyRef:\n    name: db\n    key: password",
    "step 1200 | loss 2.314 | max_tokens=4096 | tokens/s: 18234.5 | output_token_throughput: 912.3",
    "TOKENIZERS_PARALLELISM=false NCCL_IB_HCA=mlx5_0,mlx5_1 CUDA_VISIBLE_DEVICES=0,1,2,3",
    "image: nvcr.io/nvidia/pytorch:24.05-py3",
    (
        "imageID: docker-pullable://nvcr.io/nvidia/pytorch@sha256:"
        "8c1b9a2e3f4d5c6b7a8e9f0d1c2b3a4e5f6d7c8b9a0e1f2d3c4b5a6e7f8d9c0b"
    ),
    "commit 3f786850e387550fdab836ed7e6dc881de23001b",
    "uid: 4c1f8d9e-2b3a-4c5d-8e9f-0a1b2c3d4e5f",
    "NCCL WARN NET/IB : Got completion from peer 10.0.3.7<55123> with error 12, opcode 0, len 0, vendor err 129",
    "See https://docs.nvidia.com/deploy/xid-errors/index.html and http://grafana:3000/d/gpu?orgId=1",
    "The bearer token expired; Basic checks passed. Password policy: rotate monthly.",
    "JobState=FAILED Reason=NonZeroExitCode ExitCode=1:0 NodeList=gpu-[01-04] TRES=cpu=64,gres/gpu=8",
    "",
]


@pytest.mark.parametrize("text", INNOCUOUS)
def test_innocuous_evidence_is_left_exactly_as_it_was(text: str) -> None:
    assert redact.redact_text(text) == text


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("GITHUB_TOKEN", True), ("api_key", True), ("apiKey", True), ("DB_PASSWORD", True),
        ("client_secret", True), ("X-Api-Key", True), ("aws_secret_access_key", True),
        ("private_key", True), ("passwd", True), ("--token", True),
        ("max_tokens", False), ("token_count", False), ("secretName", False), ("secretKeyRef", False),
        ("PASSWORD_FILE", False), ("sort_key_order", False), ("tokenizer", False),
        ("PGPASSWORD", True), ("APITOKEN", True), ("SECRETKEY", True), ("dbpassword", True),
        ("client-key-data", True), ("AccountKey", True), ("certificate-authority-data", False),
        ("monkey", False), ("hotkey", False),
    ],
)  # fmt: skip
def test_secret_names_are_told_from_names_about_secrets(name: str, secret: bool) -> None:
    assert redact.is_secret_name(name) is secret


def test_environment_values_under_secret_looking_names_are_dropped() -> None:
    env = {
        "HF_TOKEN": "anything-at-all",
        "AWS_SECRET_ACCESS_KEY": "anything",
        "MLFLOW_TRACKING_PASSWORD": "x",
        "SSH_KEY_PATH": "/root/.ssh/id_rsa",
        "GOOGLE_APPLICATION_CREDENTIALS_JSON": "{}",
        "SLURM_JWT": "opaque",
        "TOKENIZERS_PARALLELISM": "false",
        "NCCL_DEBUG": "INFO",
        "DATABASE_URL": "postgresql://u:pw-in-url@db/x",
        "EMPTY_TOKEN": "",
    }
    cleaned = redact.redact_env(env)
    for name in (
        "HF_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "MLFLOW_TRACKING_PASSWORD",
        "SSH_KEY_PATH",
        "SLURM_JWT",
    ):
        assert cleaned[name] == redact.REDACTED
    assert cleaned["GOOGLE_APPLICATION_CREDENTIALS_JSON"] == redact.REDACTED
    assert cleaned["TOKENIZERS_PARALLELISM"] == "false"
    assert cleaned["NCCL_DEBUG"] == "INFO"
    assert cleaned["DATABASE_URL"] == f"postgresql://u:{redact.REDACTED}@db/x"
    assert cleaned["EMPTY_TOKEN"] == ""


def _observation(**overrides: object) -> findings.Observation:
    values: dict[str, object] = {
        "source": "kubernetes",
        "kind": "pod",
        "subject": "ml/train-7-worker-0",
        "text": f"container env HF_TOKEN={HF_TOKEN}",
        "command": f"kubectl --token={BEARER} -n ml get pod train-7-worker-0 -o json",
        "observed_at": NOW,
        "fields": {
            "reason": "CrashLoopBackOff",
            "exit_code": 1,
            "env": [{"name": "WANDB_API_KEY", "value": "0123abcd4567ef"}, {"name": "MODE", "value": "train"}],
            "annotations": {"api_token": "qwertyuiop", "note": f"pushed with {GITHUB_TOKEN}"},
        },
    }
    values.update(overrides)
    return findings.Observation(**values)  # type: ignore[arg-type]


def test_an_observation_is_redacted_in_text_command_and_nested_fields() -> None:
    cleaned = redact.redact_observation(_observation())
    dumped = repr(cleaned.to_dict())
    for secret in (HF_TOKEN, BEARER, "0123abcd4567ef", "qwertyuiop", GITHUB_TOKEN):
        assert secret not in dumped
    assert cleaned.fields["reason"] == "CrashLoopBackOff"
    assert cleaned.fields["exit_code"] == 1
    assert cleaned.fields["env"][1] == {"name": "MODE", "value": "train"}
    assert cleaned.subject == "ml/train-7-worker-0"


def test_a_snapshot_report_leaks_nothing_in_any_field() -> None:
    evidence = findings.Evidence(
        source="kubernetes",
        command=f"kubectl logs train-7 --token {BEARER}",
        excerpt=f"{PEM_KEY}\nauth failed for {SLACK_BOT_TOKEN}",
        observed_at=NOW,
        expected="login succeeds",
        observed=f"401 with Authorization: Bearer {BEARER}",
    )
    finding = findings.Finding(
        layer=findings.Layer.WORKFLOW,
        rule="workflow.auth-failure",
        severity=findings.Severity.HIGH,
        summary=f"Registry rejected {GITHUB_TOKEN}",
        evidence=(evidence,),
        next_step="rotate the token in secret `ghcr-pull`",
        subject="ml/train-7",
    )
    snapshot = report.SnapshotReport(
        target="ml/train-7",
        target_kind="job",
        taken_at=NOW,
        elapsed_ms=1200,
        verdict=findings.Verdict(
            layer=findings.Layer.WORKFLOW, confidence=0.8, summary=f"bad token {HF_TOKEN}"
        ),
        findings=(finding,),
        collectors=(
            findings.CollectorReport(
                name="logs",
                outcome=findings.CollectorOutcome.PARTIAL,
                elapsed_ms=5,
                detail=f"x {AWS_ACCESS_KEY}",
            ),
        ),
        observations=(_observation(),),
        unexplained=(_observation(text=f"JWT {JWT}"),),
        placement={"image": "nvcr.io/nvidia/pytorch:24.05-py3", "registry_password": "pw12345"},
        not_checked=(f"events: 403 for token {SLACK_BOT_TOKEN}",),
    )
    dumped = repr(redact.redact_report(snapshot).to_dict(include_observations=True))
    for secret in (
        BEARER,
        PEM_BODY_LINE,
        SLACK_BOT_TOKEN,
        GITHUB_TOKEN,
        HF_TOKEN,
        AWS_ACCESS_KEY,
        JWT,
        "pw12345",
    ):
        assert secret not in dumped
    assert "nvcr.io/nvidia/pytorch:24.05-py3" in dumped
    assert "rotate the token in secret `ghcr-pull`" in dumped


SECRETS = [
    SLACK_BOT_TOKEN,
    SLACK_APP_TOKEN,
    GITHUB_TOKEN,
    HF_TOKEN,
    AWS_ACCESS_KEY,
    AWS_SECRET_KEY,
    GOOGLE_API_KEY,
    JWT,
]
# Lowercase words, digits and light punctuation: no token prefix (`xoxb-`, `sk-`, `ya29.`) can form.
_PROSE = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789 ,/()\n", max_size=200)


@settings(max_examples=200)
@given(before=_PROSE, secret=st.sampled_from(SECRETS), after=_PROSE)
def test_a_known_secret_anywhere_in_text_is_removed(before: str, secret: str, after: str) -> None:
    assert secret not in redact.redact_text(f"{before} {secret}\n{after}")


@settings(max_examples=200)
@given(text=_PROSE)
def test_lowercase_prose_passes_through_untouched(text: str) -> None:
    assert redact.redact_text(text) == text


@settings(max_examples=300)
@given(text=st.text(max_size=400))
def test_redaction_never_fails_and_is_idempotent(text: str) -> None:
    once = redact.redact_text(text)
    assert redact.redact_text(once) == once


def test_long_hostile_inputs_are_handled() -> None:
    for text in (
        "a:" * 20_000,
        "password=" * 10_000,
        "-----BEGIN PRIVATE KEY-----" + "A" * 100_000,
        "x" * 200_000,
        "mysql " * 20_000,
        "curl -u a:" * 10_000,
        "machine x password " * 5_000,
        "eyJ" * 30_000,
        "sshpass -p" * 10_000,
    ):
        once = redact.redact_text(text)
        assert redact.redact_text(once) == once
