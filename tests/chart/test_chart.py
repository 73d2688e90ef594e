"""The chart with Zero to JupyterHub: helm lint --strict and helm template in every supported setup, each
rendered object valid Kubernetes 1.32, and the wiring between our objects and Zero to JupyterHub's.

Setups (``SETUPS``): the defaults; PostgreSQL by Secret and by URL; cert-manager; metrics with the
Prometheus Operator's ServiceMonitor; custom images.
"""

from __future__ import annotations

import base64
import json
import pathlib
import shutil
import subprocess
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml
from cryptography import x509

from .conftest import (
    CHART,
    NAMESPACE,
    VALUES,
    of_kind,
    put_dependencies,
    render_chart,
    run,
    template_args,
    vendor_dir,
)

KUBERNETES_VERSION = "1.32.0"
SERVICE_MONITOR = "monitoring.coreos.com/v1/ServiceMonitor"
# Kinds from CRDs that kubernetes-validate has no schema for; their fields are checked in the tests below.
CRD_KINDS = {
    ("cert-manager.io/v1", "Issuer"),
    ("cert-manager.io/v1", "Certificate"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
}

SETUPS = {
    # name: (values files in tests/chart/values/, --set values, capabilities)
    "defaults": ((), {}, ()),
    "postgres by secret": (("postgres-secret.yaml",), {}, ()),
    "postgres by url": ((), {"egs.database.url": "postgresql://egs:secret@db.example.org/egs"}, ()),
    "cert-manager": (("cert-manager.yaml",), {}, ()),
    "metrics and service monitor": (("metrics.yaml",), {}, (SERVICE_MONITOR,)),
    "custom images": (("custom-images.yaml",), {}, ()),
}


@pytest.fixture(scope="session")
def rendered(render) -> dict[str, list[dict]]:
    return {name: render(*files, set_values=sets, api_versions=caps) for name, (files, sets, caps) in SETUPS.items()}


@pytest.fixture(scope="session")
def defaults(rendered) -> list[dict]:
    return rendered["defaults"]


def env_of(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}


def egs_pod(docs: list[dict]) -> dict:
    return of_kind(docs, "Deployment", "egs")["spec"]["template"]


def egs_container(docs: list[dict]) -> dict:
    (container,) = egs_pod(docs)["spec"]["containers"]
    return container


def hub_values(docs: list[dict]) -> dict:
    """What the hub's jupyterhub_config.py reads with get_config: the values.yaml in Zero to JupyterHub's Secret."""
    secret = of_kind(docs, "Secret", "hub")
    return yaml.safe_load(base64.b64decode(secret["data"]["values.yaml"]))


def egs_config(docs: list[dict]) -> dict:
    return json.loads(of_kind(docs, "ConfigMap", "egs")["data"]["egs_config.json"])["EGSService"]


@pytest.mark.parametrize("setup", SETUPS, ids=SETUPS.keys())
def test_helm_lint_strict(helm, chart_with_dependency, setup):
    files, sets, _ = SETUPS[setup]
    out = run(helm, "lint", "--strict", str(chart_with_dependency), *template_args(files, sets))
    assert "1 chart(s) linted, 0 chart(s) failed" in out


@pytest.mark.parametrize("setup", SETUPS, ids=SETUPS.keys())
def test_every_object_is_valid_kubernetes(rendered, setup):
    problems, unchecked = [], set()
    for doc in rendered[setup]:
        if (doc["apiVersion"], doc["kind"]) in CRD_KINDS:
            unchecked.add(doc["kind"])
            continue
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            problems.append(f"{doc['kind']} {doc['metadata']['name']}: {e.message} at {list(e.path)}")
    assert not problems, "\n".join(problems)
    want_unchecked = {
        "cert-manager": {"Issuer", "Certificate"},
        "metrics and service monitor": {"ServiceMonitor"},
    }.get(setup, set())
    assert unchecked == want_unchecked


def test_the_defaults_render_the_whole_installation(defaults):
    ours = sorted(
        (d["kind"], d["metadata"]["name"])
        for d in defaults
        if (d["metadata"].get("labels") or {}).get("app.kubernetes.io/name") == "egs-hub"
        and d["kind"] != "CustomResourceDefinition"
    )
    assert ours == [
        ("ClusterRole", "egs-egs-hub"),
        ("ClusterRole", "egs-egs-hub-spawner"),
        ("ClusterRole", "egs-egs-hub-workspace"),
        ("ClusterRoleBinding", "egs-egs-hub"),
        ("ConfigMap", "egs"),
        ("ConfigMap", "egs-dashboard"),
        ("ConfigMap", "egs-hub-config"),
        ("Deployment", "egs"),
        ("MutatingWebhookConfiguration", "egs-egs-hub"),
        ("Namespace", "egs-checks"),
        ("Namespace", "egs-pools"),
        ("NetworkPolicy", "egs"),
        ("PersistentVolumeClaim", "egs"),
        ("PodDisruptionBudget", "egs"),
        ("Role", "egs-egs-hub-checks"),
        ("Role", "egs-egs-hub-pools"),
        ("RoleBinding", "egs-egs-hub-checks"),
        ("RoleBinding", "egs-egs-hub-pools"),
        ("Secret", "egs-cookie"),
        ("Secret", "egs-webhook-tls"),
        ("Service", "egs"),
        ("ServiceAccount", "egs"),
        ("ValidatingAdmissionPolicy", "egs-egs-hub-service-scope"),
        ("ValidatingAdmissionPolicy", "egs-egs-hub-workspace-nodes"),
        ("ValidatingAdmissionPolicyBinding", "egs-egs-hub-service-scope"),
        ("ValidatingAdmissionPolicyBinding", "egs-egs-hub-workspace-nodes"),
    ]
    # Zero to JupyterHub's hub and proxy come with it, and the CRD.
    assert {
        ("Deployment", "hub"),
        ("Deployment", "proxy"),
        ("CustomResourceDefinition", "gpuprovisionrequests.egs.io"),
    } <= {(d["kind"], d["metadata"]["name"]) for d in defaults}


# The hub and the egs service


def test_the_hub_reaches_the_egs_service_at_its_service(defaults):
    url = urlsplit(hub_values(defaults)["hub"]["services"]["egs"]["url"])
    service = of_kind(defaults, "Service", url.hostname)
    (http,) = [p for p in service["spec"]["ports"] if p["port"] == url.port]
    assert http["targetPort"] == "http"
    assert service["spec"]["selector"].items() <= egs_pod(defaults)["metadata"]["labels"].items()
    (port,) = [p for p in egs_container(defaults)["ports"] if p["name"] == "http"]
    listen = urlsplit(env_of(egs_container(defaults))["JUPYTERHUB_SERVICE_URL"]["value"])
    assert port["containerPort"] == listen.port == 8080


def test_the_hub_and_the_egs_pod_take_the_token_from_the_same_secret(defaults):
    secret = of_kind(defaults, "Secret", "hub")
    assert "hub.services.egs.apiToken" in secret["data"]
    token = base64.b64decode(secret["data"]["hub.services.egs.apiToken"]).decode()
    assert len(token) >= 32
    # The hub reads it from that Secret, mounted where Zero to JupyterHub's get_secret_value looks.
    hub = of_kind(defaults, "Deployment", "hub")["spec"]["template"]["spec"]
    volume = next(v["name"] for v in hub["volumes"] if v.get("secret", {}).get("secretName") == "hub")
    mounts = {m["name"]: m["mountPath"] for m in hub["containers"][0]["volumeMounts"]}
    assert mounts[volume] == "/usr/local/etc/jupyterhub/secret/"
    ref = env_of(egs_container(defaults))["JUPYTERHUB_API_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "hub", "key": "hub.services.egs.apiToken"}


def test_the_egs_pod_has_the_environment_of_a_managed_service(defaults):
    env = {name: e.get("value") for name, e in env_of(egs_container(defaults)).items()}
    assert env["JUPYTERHUB_SERVICE_NAME"] == "egs"
    assert env["JUPYTERHUB_API_URL"] == "http://hub:8081/hub/api"
    assert env["JUPYTERHUB_BASE_URL"] == "/"
    assert env["JUPYTERHUB_SERVICE_PREFIX"] == "/services/egs/"
    assert env["JUPYTERHUB_CLIENT_ID"] == "service-egs"
    assert env["JUPYTERHUB_OAUTH_CALLBACK_URL"] == "/services/egs/oauth_callback"
    assert json.loads(env["JUPYTERHUB_OAUTH_ACCESS_SCOPES"]) == ["access:services!service=egs"]
    assert env["EGS_CONFIG_FILE"] == "/etc/egs/config/egs_config.json"
    # The hub API is the hub Service's port.
    hub_service = of_kind(defaults, "Service", "hub")
    assert [p["port"] for p in hub_service["spec"]["ports"]] == [urlsplit(env["JUPYTERHUB_API_URL"]).port]


def test_the_egs_pod_registers_this_cluster_in_cluster_and_no_local_host(defaults):
    config = egs_config(defaults)
    assert config["clusters"] == [{"name": "home", "in_cluster": True}]
    assert config["local_gpus"] is False
    assert config["data_dir"] == "/var/lib/egs"


def test_egs_config_passes_through_and_cluster_settings(render):
    docs = render(
        set_values={
            "egs.cluster.name": "east",
            "egs.cluster.nodeSelector": "egs.io/slice\\,pool=training",
            "egs.cluster.exitGrace": "10m",
            "egs.config.reconcile_interval": "2",
        }
    )
    config = egs_config(docs)
    assert config["clusters"] == [
        {"name": "east", "in_cluster": True, "node_selector": "egs.io/slice,pool=training", "exit_grace": "10m"}
    ]
    assert config["reconcile_interval"] == 2
    hook = of_kind(docs, "MutatingWebhookConfiguration")["webhooks"][0]
    assert hook["clientConfig"]["service"]["path"] == "/services/egs/webhooks/pods/east"
    settings = json.loads(of_kind(docs, "ConfigMap", "egs-hub-config")["data"]["egs_hub_settings.json"])
    assert settings == {"cluster": "east", "namespace": NAMESPACE, "admin_groups": []}


def test_kubeconfigs_of_more_clusters_are_mounted_from_a_secret(render, defaults):
    docs = render(set_values={"egs.kubeconfigSecret": "egs-kubeconfigs"})
    volume = next(v for v in egs_pod(docs)["spec"]["volumes"] if v["name"] == "kubeconfigs")
    assert volume["secret"]["secretName"] == "egs-kubeconfigs"
    mount = next(m for m in egs_container(docs)["volumeMounts"] if m["name"] == "kubeconfigs")
    assert (mount["mountPath"], mount["readOnly"]) == ("/etc/egs/kubeconfigs", True)
    assert "kubeconfigs" not in {v["name"] for v in egs_pod(defaults)["spec"]["volumes"]}


def test_the_egs_pod_is_probed_limited_and_unprivileged(defaults):
    pod = egs_pod(defaults)
    container = egs_container(defaults)
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/services/egs/api/v1/health", "port": "http"}
    assert container["resources"]["requests"] == {"cpu": "100m", "memory": "256Mi"}
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    for c in (container, *pod["spec"]["initContainers"]):
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
    deployment = of_kind(defaults, "Deployment", "egs")["spec"]
    assert (deployment["replicas"], deployment["strategy"]) == (1, {"type": "Recreate"})
    budget = of_kind(defaults, "PodDisruptionBudget", "egs")["spec"]
    assert budget["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()


# Database


def test_sqlite_on_a_pvc_by_default_migrated_before_the_service_starts(defaults):
    pod = egs_pod(defaults)["spec"]
    claim = of_kind(defaults, "PersistentVolumeClaim", "egs")
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    data = next(v for v in pod["volumes"] if v["name"] == "data")
    assert data["persistentVolumeClaim"]["claimName"] == "egs"
    (migrate,) = pod["initContainers"]
    assert migrate["command"][:3] == ["egs-hub", "db", "upgrade"]
    for container in (migrate, pod["containers"][0]):
        assert env_of(container)["EGS_DB_URL"]["value"] == "sqlite:////var/lib/egs/egs.sqlite"
        assert {"name": "data", "mountPath": "/var/lib/egs"} in container["volumeMounts"]


def test_postgres_from_a_secret(rendered):
    docs = rendered["postgres by secret"]
    pod = egs_pod(docs)["spec"]
    assert not [d for d in docs if d["kind"] == "PersistentVolumeClaim" and d["metadata"]["name"] == "egs"]
    for container in (*pod["initContainers"], *pod["containers"]):
        ref = env_of(container)["EGS_DB_URL"]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": "egs-db", "key": "url"}
    assert next(v for v in pod["volumes"] if v["name"] == "data") == {"name": "data", "emptyDir": {}}


def test_postgres_from_a_url(rendered):
    pod = egs_pod(rendered["postgres by url"])["spec"]
    for container in (*pod["initContainers"], *pod["containers"]):
        assert env_of(container)["EGS_DB_URL"]["value"] == "postgresql://egs:secret@db.example.org/egs"


def test_every_replica_signs_cookies_with_the_secret_of_the_release(defaults):
    secret = of_kind(defaults, "Secret", "egs-cookie")
    assert len(base64.b64decode(secret["data"]["cookie-secret"])) == 64
    ref = env_of(egs_container(defaults))["EGS_COOKIE_SECRET"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "egs-cookie", "key": "cookie-secret"}


def test_one_replica_on_sqlite_replaced_by_recreate(defaults):
    deployment = of_kind(defaults, "Deployment", "egs")["spec"]
    assert deployment["replicas"] == 1
    assert deployment["strategy"] == {"type": "Recreate"}


def test_replicas_on_postgres_roll_and_tell_the_standbys_where_the_leader_is(render):
    docs = render(set_values=["egs.database.existingSecret=egs-db", "egs.replicas=3"])
    deployment = of_kind(docs, "Deployment", "egs")["spec"]
    assert deployment["replicas"] == 3
    assert deployment["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    env = env_of(egs_pod(docs)["spec"]["containers"][0])
    assert env["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert env["EGS_ADVERTISE_URL"]["value"] == "http://$(POD_IP):8080"


# Webhook TLS


def test_the_webhook_trusts_the_ca_that_signed_its_serving_certificate(defaults):
    (hook,) = of_kind(defaults, "MutatingWebhookConfiguration")["webhooks"]
    secret = of_kind(defaults, "Secret", "egs-webhook-tls")
    ca = x509.load_pem_x509_certificate(base64.b64decode(hook["clientConfig"]["caBundle"]))
    served = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    served.verify_directly_issued_by(ca)  # raises unless ca signed it
    assert base64.b64decode(secret["data"]["ca.crt"]) == base64.b64decode(hook["clientConfig"]["caBundle"])
    names = served.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    )
    assert "egs.egs.svc" in names
    # The API server calls egs:443, which is the pod's webhook listener with this certificate.
    assert hook["clientConfig"]["service"] == {
        "name": "egs",
        "namespace": NAMESPACE,
        "path": "/services/egs/webhooks/pods/home",
        "port": 443,
    }
    (https,) = [p for p in of_kind(defaults, "Service", "egs")["spec"]["ports"] if p["port"] == 443]
    (listener,) = [p for p in egs_container(defaults)["ports"] if p["name"] == https["targetPort"]]
    config = egs_config(defaults)
    assert config["webhook_port"] == listener["containerPort"]
    mount = next(m for m in egs_container(defaults)["volumeMounts"] if m["name"] == "webhook-tls")
    volume = next(v for v in egs_pod(defaults)["spec"]["volumes"] if v["name"] == "webhook-tls")
    assert volume["secret"]["secretName"] == "egs-webhook-tls"
    assert (config["webhook_certfile"], config["webhook_keyfile"]) == (
        f"{mount['mountPath']}/tls.crt",
        f"{mount['mountPath']}/tls.key",
    )


def test_the_webhook_registration(defaults):
    (hook,) = of_kind(defaults, "MutatingWebhookConfiguration")["webhooks"]
    assert hook["namespaceSelector"] == {"matchExpressions": [{"key": "egs.io/slice", "operator": "Exists"}]}
    assert hook["rules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["pods"],
            "scope": "Namespaced",
        }
    ]
    assert (hook["sideEffects"], hook["failurePolicy"], hook["admissionReviewVersions"]) == ("None", "Fail", ["v1"])


def test_cert_manager_issues_the_certificate_and_injects_its_ca(rendered):
    docs = rendered["cert-manager"]
    webhook = of_kind(docs, "MutatingWebhookConfiguration")
    assert "caBundle" not in webhook["webhooks"][0]["clientConfig"]
    assert not [d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == "egs-webhook-tls"]
    namespace, name = webhook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].split("/")
    serving = of_kind(docs, "Certificate", name)
    assert namespace == NAMESPACE
    assert serving["spec"]["secretName"] == "egs-webhook-tls"
    assert serving["spec"]["duration"] == "87600h"  # webhook.certValidityDays
    assert "egs.egs.svc" in serving["spec"]["dnsNames"]
    # Signed by the release's CA issuer, whose CA comes from a self-signed root.
    issuer = of_kind(docs, "Issuer", serving["spec"]["issuerRef"]["name"])
    ca = of_kind(docs, "Certificate", "egs-webhook-ca")
    assert issuer["spec"]["ca"]["secretName"] == ca["spec"]["secretName"] and ca["spec"]["isCA"] is True
    assert of_kind(docs, "Issuer", ca["spec"]["issuerRef"]["name"])["spec"] == {"selfSigned": {}}


def test_an_existing_secret_serves_the_webhook_the_same_at_every_render(render):
    """GitOps (issue 46, item 7): helm template has no cluster to look in, so the chart's own certificate is new
    at every render; with a Secret the admin manages (or cert-manager) two renders are the same."""
    given = {"webhook.existingSecret": "corp-webhook-tls", "webhook.caBundle": "Q0EK"}
    docs = render(set_values=given)
    assert not [d for d in docs if d["kind"] == "Secret" and "webhook" in d["metadata"]["name"]]
    volume = next(v for v in egs_pod(docs)["spec"]["volumes"] if v["name"] == "webhook-tls")
    assert volume["secret"]["secretName"] == "corp-webhook-tls"
    (hook,) = of_kind(docs, "MutatingWebhookConfiguration")["webhooks"]
    assert hook["clientConfig"]["caBundle"] == "Q0EK"

    def hooks_and_secrets(docs: list[dict]) -> list[dict]:
        kinds = ("Secret", "Certificate")
        return [
            d
            for d in docs
            if d["kind"] == "MutatingWebhookConfiguration"
            or (d["kind"] in kinds and "webhook" in d["metadata"]["name"])
        ]

    assert hooks_and_secrets(render(set_values=given)) == hooks_and_secrets(docs)
    assert hooks_and_secrets(render("cert-manager.yaml")) == hooks_and_secrets(render("cert-manager.yaml"))
    assert hooks_and_secrets(render()) != hooks_and_secrets(render())  # the chart's own: a new CA each time


@pytest.mark.parametrize(
    "values, said",
    [
        ({"webhook.existingSecret": "corp-webhook-tls"}, "webhook.existingSecret needs webhook.caBundle"),
        (
            {
                "webhook.existingSecret": "corp-webhook-tls",
                "webhook.caBundle": "Q0EK",
                "webhook.certManager.enabled": "true",
            },
            "webhook.existingSecret and webhook.certManager.enabled: give one",
        ),
    ],
)
def test_an_existing_secret_is_refused_without_its_ca_or_beside_cert_manager(helm, chart_with_dependency, values, said):
    args = [helm, "template", "egs", str(chart_with_dependency), "-n", "egs", *template_args(set_values=values)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and said in done.stderr, done.stderr


def test_cert_manager_with_an_existing_issuer(render):
    docs = render(
        "cert-manager.yaml",
        set_values={
            "webhook.certManager.issuerRef.name": "corp-ca",
            "webhook.certManager.issuerRef.kind": "ClusterIssuer",
        },
    )
    serving = of_kind(docs, "Certificate", "egs-webhook")
    assert serving["spec"]["issuerRef"] == {"name": "corp-ca", "kind": "ClusterIssuer"}
    assert not [d for d in docs if d["kind"] == "Issuer"]


# Metrics and dashboards


def test_metrics_slack_and_the_service_monitor(rendered, defaults):
    docs = rendered["metrics and service monitor"]
    config = egs_config(docs)
    assert config["prometheus_url"] == "http://prometheus-operated.monitoring.svc:9090"
    assert config["prometheus_selector"] == 'job="dcgm-exporter"'
    slack = env_of(egs_container(docs))["EGS_SLACK_WEBHOOK_URL"]["valueFrom"]["secretKeyRef"]
    assert slack == {"name": "egs-slack", "key": "webhook-url"}
    monitor = of_kind(docs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert (
        monitor["spec"]["selector"]["matchLabels"].items()
        <= of_kind(docs, "Service", "egs")["metadata"]["labels"].items()
    )
    (endpoint,) = monitor["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("http", "/services/egs/metrics")
    # /metrics asks for the admin scope: the scrape sends the egs-prometheus service's token, which has it.
    assert endpoint["authorization"]["credentials"] == {"name": "hub", "key": "hub.services.egs-prometheus.apiToken"}
    assert "hub.services.egs-prometheus.apiToken" in of_kind(docs, "Secret", "hub")["data"]
    role = hub_values(docs)["hub"]["loadRoles"]["egs-prometheus"]
    assert (role["scopes"], role["services"]) == (["custom:egs:admin"], ["egs-prometheus"])

    # Prometheus (any namespace) may reach the egs pod's HTTP port; without the ServiceMonitor, not.
    def scrapers(docs: list[dict]) -> list[dict]:
        (http, _) = of_kind(docs, "NetworkPolicy", "egs")["spec"]["ingress"]
        return [f for f in http["from"] if f["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}]

    assert scrapers(docs) == [
        {"namespaceSelector": {}, "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}
    ]
    assert scrapers(defaults) == []
    # Without the Prometheus Operator's CRDs there is none, and none by default.
    assert not [d for d in defaults if d["kind"] == "ServiceMonitor"]
    assert "EGS_SLACK_WEBHOOK_URL" not in env_of(egs_container(defaults))


def test_the_dashboard_is_a_configmap_grafana_picks_up(rendered, defaults):
    dashboard = of_kind(defaults, "ConfigMap", "egs-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboard["metadata"]["namespace"] == NAMESPACE
    assert json.loads(dashboard["data"]["egs-hub.json"]) == json.loads((CHART / "dashboards/egs-hub.json").read_text())
    assert (
        of_kind(rendered["metrics and service monitor"], "ConfigMap", "egs-dashboard")["metadata"]["namespace"]
        == "monitoring"
    )


# Images


def images(docs: list[dict]) -> dict[str, str]:
    hub = of_kind(docs, "Deployment", "hub")["spec"]["template"]["spec"]["containers"][0]["image"]
    singleuser = hub_values(docs)["singleuser"]["image"]
    return {
        "egs": egs_container(docs)["image"],
        "migrate": egs_pod(docs)["spec"]["initContainers"][0]["image"],
        "hub": hub,
        "singleuser": f"{singleuser['name']}:{singleuser['tag']}",
    }


def test_default_images_are_ours_at_the_app_version(defaults):
    version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert images(defaults) == {
        "egs": f"ghcr.io/egs-hub/egs-hub-egs:{version}",
        "migrate": f"ghcr.io/egs-hub/egs-hub-egs:{version}",
        "hub": f"ghcr.io/egs-hub/egs-hub-hub:{version}",
        "singleuser": f"ghcr.io/egs-hub/egs-hub-singleuser:{version}",
    }


def test_custom_images(rendered):
    docs = rendered["custom images"]
    assert images(docs) == {
        "egs": "registry.example.org/gpu/egs:2025.1",
        "migrate": "registry.example.org/gpu/egs:2025.1",
        "hub": "registry.example.org/gpu/hub:2025.1",
        "singleuser": "registry.example.org/gpu/singleuser:2025.1",
    }
    assert egs_pod(docs)["spec"]["imagePullSecrets"] == [{"name": "registry-credentials"}]
    assert egs_container(docs)["imagePullPolicy"] == "Always"


# hub_config/ in the hub


def test_the_chart_folder_holds_no_link():
    """Issue 46, item 3: a plain copy of the chart (or its package) must hold every file it reads."""
    assert [str(p.relative_to(CHART)) for p in CHART.rglob("*") if p.is_symlink()] == []


def test_a_copy_of_the_chart_packages_lints_and_renders(helm, tmp_path):
    copy = tmp_path / "egs-hub"
    shutil.copytree(CHART, copy, symlinks=True, ignore=shutil.ignore_patterns("charts"))
    put_dependencies(copy, vendor_dir())
    out = run(helm, "package", str(copy), "--destination", str(tmp_path))
    (package,) = tmp_path.glob("egs-hub-*.tgz")
    assert str(package) in out
    assert "1 chart(s) linted, 0 chart(s) failed" in run(helm, "lint", "--strict", str(package))
    docs = render_chart(helm, package)
    config_map = of_kind(docs, "ConfigMap", "egs-hub-config")
    assert config_map["data"]["egs_hub.py"] == (CHART / "hub_config" / "egs_hub.py").read_text()
    assert of_kind(docs, "Deployment", "hub")


def test_hub_config_is_mounted_into_the_hub_as_in_the_repository(defaults):
    config_map = of_kind(defaults, "ConfigMap", "egs-hub-config")
    sources = {p.name: p.read_text() for p in sorted((CHART / "hub_config").glob("*.py"))}
    assert sources and {k: v for k, v in config_map["data"].items() if k.endswith(".py")} == sources
    hub = of_kind(defaults, "Deployment", "hub")["spec"]["template"]["spec"]
    volume = next(v["name"] for v in hub["volumes"] if v.get("configMap", {}).get("name") == "egs-hub-config")
    mounts = {m["name"]: m["mountPath"] for m in hub["containers"][0]["volumeMounts"]}
    assert mounts[volume] == "/usr/local/etc/jupyterhub/egs"
    # Zero to JupyterHub runs hub.extraConfig after its own settings; ours runs the mounted files.
    assert "/usr/local/etc/jupyterhub/egs/*.py" in hub_values(defaults)["hub"]["extraConfig"]["egs-hub"]


# Network policy


def pod_labels(docs: list[dict], kind: str, name: str) -> dict:
    return of_kind(docs, kind, name)["spec"]["template"]["metadata"]["labels"]


def test_the_network_policy_lets_the_hub_proxy_and_api_server_in(defaults):
    policy = of_kind(defaults, "NetworkPolicy", "egs")["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= egs_pod(defaults)["metadata"]["labels"].items()
    http, webhook = policy["ingress"]
    assert http["ports"] == [{"port": "http"}] and webhook == {"ports": [{"port": "webhook"}]}
    selectors = [f["podSelector"]["matchLabels"] for f in http["from"] if "namespaceSelector" not in f]
    # The selectors match Zero to JupyterHub's hub and proxy pods, as its own policies select them.
    hub, proxy = pod_labels(defaults, "Deployment", "hub"), pod_labels(defaults, "Deployment", "proxy")
    assert [s.items() <= hub.items() for s in selectors] == [True, False, False, False]
    assert [s.items() <= proxy.items() for s in selectors] == [False, True, False, False]
    # The other egs replicas (a standby forwards to the leader; test_network_policies.py).
    assert selectors[2] == policy["podSelector"]["matchLabels"]
    # Servers: Zero to JupyterHub's singleuser labels, in the release's namespace and in slices' ones.
    server = {"component": "singleuser-server", "app": "jupyterhub", "release": "egs"}
    assert selectors[3] == server
    (in_slices,) = [f for f in http["from"] if "namespaceSelector" in f and f["podSelector"]["matchLabels"] == server]
    assert in_slices["namespaceSelector"] == {"matchExpressions": [{"key": "egs.io/slice", "operator": "Exists"}]}
    # Zero to JupyterHub's hub, proxy and singleuser policies let them out to the egs pod's port.
    for name in ("hub", "proxy", "singleuser"):
        egress = of_kind(defaults, "NetworkPolicy", name)["spec"]["egress"]
        assert any(
            {"port": 8080} in rule.get("ports", [])
            and any(
                t.get("podSelector", {}).get("matchLabels", {}).items()
                <= egs_pod(defaults)["metadata"]["labels"].items()
                for t in rule.get("to", [])
                if "podSelector" in t
            )
            for rule in egress
        ), name
    # Zero to JupyterHub's hub policy lets the egs pod in (its network-access-hub label).
    hub_policy = of_kind(defaults, "NetworkPolicy", "hub")["spec"]
    allowed = [
        f["podSelector"]["matchLabels"]
        for rule in hub_policy["ingress"]
        for f in rule.get("from", [])
        if "podSelector" in f
    ]
    assert any(s.items() <= egs_pod(defaults)["metadata"]["labels"].items() for s in allowed)


# Bad values get a clear error


BAD_VALUES = {
    # --set values: want in the error
    "both database settings": (
        {"egs.database.url": "postgresql://db/egs", "egs.database.existingSecret": "egs-db"},
        "egs.database.url and egs.database.existingSecret are both set",
    ),
    "replicas on sqlite": ({"egs.replicas": "2"}, "egs.replicas is 2: more than one replica needs PostgreSQL"),
    "no replica": ({"egs.replicas": "0"}, "at '/egs/replicas'"),
    "not a postgres url": ({"egs.database.url": "mysql://db/egs"}, "egs.database.url must be a PostgreSQL URL"),
    "hub points elsewhere": (
        {"jupyterhub.hub.services.egs.url": "http://elsewhere:8080"},
        "jupyterhub.hub.services.egs.url must be http://egs:8080",
    ),
    # values.schema.json names the place as a JSON pointer
    "hub config not run": (
        {"jupyterhub.hub.extraConfig.egs-hub": "pass"},
        "jupyterhub.hub.extraConfig.egs-hub must run the Python files in /usr/local/etc/jupyterhub/egs",
    ),
    "hub config not mounted": (
        {"jupyterhub.hub.extraVolumeMounts": "null"},
        "must mount the ConfigMap egs-hub-config as the volume egs-hub-config at /usr/local/etc/jupyterhub/egs",
    ),
    "port the hub may not reach": (
        {"egs.port": "9090", "jupyterhub.hub.services.egs.url": "http://egs:9090"},
        "jupyterhub.hub.networkPolicy.egress must let it reach the egs pods on egs.port (9090)",
    ),
    "per-user volumes": (
        {"jupyterhub.singleuser.storage.type": "dynamic"},
        'jupyterhub.singleuser.storage.type must be none, not "dynamic"',
    ),
    "unknown key": ({"egs.databse.url": "x"}, "at '/egs': additional properties 'databse' not allowed"),
    "bad port": ({"egs.port": "0"}, "at '/egs/port'"),
    "bad cluster name": ({"egs.cluster.name": "Home_1"}, "at '/egs/cluster/name'"),
    "local is this host's": ({"egs.cluster.name": "local"}, "at '/egs/cluster/name'"),
    "bad issuer kind": ({"webhook.certManager.issuerRef.kind": "Vault"}, "at '/webhook/certManager/issuerRef/kind'"),
}


@pytest.mark.parametrize("sets, want", BAD_VALUES.values(), ids=BAD_VALUES.keys())
def test_bad_values_are_refused_naming_them(helm, chart_with_dependency, sets, want):
    args = [helm, "template", "egs", str(chart_with_dependency), "-n", NAMESPACE, *template_args((), sets)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and want in done.stderr, done.stderr[-2000:]


def test_values_files_exist():
    assert {f for files, _, _ in SETUPS.values() for f in files} <= {
        p.name for p in pathlib.Path(VALUES).glob("*.yaml")
    }


def test_put_dependencies_copies_the_vendored_chart_once(tmp_path):
    chart, vendor = tmp_path / "charts" / "c", tmp_path / "vendor"
    chart.mkdir(parents=True)
    vendor.mkdir()
    (chart / "Chart.yaml").write_text(
        "apiVersion: v2\nname: c\nversion: 0.1.0\n"
        "dependencies: [{name: dep, version: 1.0.0, repository: https://example.org/charts/}]\n"
    )
    (vendor / "dep-1.0.0.tgz").write_bytes(b"released")
    assert put_dependencies(chart, vendor) == [chart / "charts" / "dep-1.0.0.tgz"]
    assert (chart / "charts" / "dep-1.0.0.tgz").read_bytes() == b"released"
    assert [p.name for p in (chart / "charts").iterdir()] == ["dep-1.0.0.tgz"]  # nothing else for helm to load
    (vendor / "dep-1.0.0.tgz").write_bytes(b"re-released")
    put_dependencies(chart, vendor)
    assert (chart / "charts" / "dep-1.0.0.tgz").read_bytes() == b"re-released"
    (vendor / "dep-1.0.0.tgz").unlink()
    with pytest.raises(pytest.fail.Exception, match=r"dep-1\.0\.0\.tgz is missing"):
        put_dependencies(chart, vendor)


def notes(helm: str, chart, *sets: str) -> str:
    """NOTES.txt as `helm install` prints it (client-side dry run: no cluster needed)."""
    out = run(helm, "install", "egs", str(chart), "-n", NAMESPACE, "--dry-run=client", *(f"--set={s}" for s in sets))
    return out[out.index("NOTES:") :]


def test_the_notes_tell_the_admin_how_to_log_in_and_start(helm, chart_with_dependency):
    text = notes(helm, chart_with_dependency)
    assert "kubectl -n egs port-forward service/proxy-public" in text
    assert "Log in as an admin: admin." in text and 'Zero to JupyterHub\'s "dummy"' in text
    assert "/services/egs/" in text and "/hub/admin" in text
    assert "kubectl label node <gpu-node> egs.io/slice=free" in text and "home: team-a" in text
    assert "GPU metrics are off" in text
    text = notes(
        helm,
        chart_with_dependency,
        "jupyterhub.hub.config.Authenticator.admin_users={alice,bob}",
        "jupyterhub.hub.config.JupyterHub.authenticator_class=github",
        "egs.cluster.name=east",
        "egs.metrics.prometheusUrl=http://prometheus:9090",
    )
    assert "Log in as an admin: alice, bob." in text and "dummy" not in text
    assert "east: team-a" in text and "GPU metrics are off" not in text
