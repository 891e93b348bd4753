"""Credentials of uploaded clusters: kubeconfigs encrypted at rest with CLUSTER_CREDENTIALS_KEYS
(MultiFernet, so keys rotate), and parsed and checked before they are stored.

The plaintext kubeconfig lives only in memory: the gateway loads it from a dict
(claims.kube.connection.load_from_memory), never from a file.
"""

from __future__ import annotations

from typing import Any

import yaml
from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.utils.translation import gettext as _

from claims.models import Cluster

Obj = dict[str, Any]
NO_KEYS = (
    "CLUSTER_CREDENTIALS_KEYS is not set: the portal cannot encrypt or read uploaded "
    "kubeconfigs. Set it to one or more Fernet keys, newest first (.env.example says how)."
)
# Parts of a kubeconfig that would make the portal's server read its own files or run a
# program: an uploaded kubeconfig must carry its credentials inline.
LOCAL_REFERENCES = {
    "certificate-authority": "certificate-authority-data",
    "client-certificate": "client-certificate-data",
    "client-key": "client-key-data",
    "tokenFile": "token",
}


def _fernet() -> MultiFernet:
    keys = settings.CLUSTER_CREDENTIALS_KEYS
    if not keys:
        raise ImproperlyConfigured(NO_KEYS)
    return MultiFernet([Fernet(key) for key in keys])


def encrypt(text: str) -> str:
    return _fernet().encrypt(text.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise ImproperlyConfigured(
            "A stored kubeconfig does not decrypt with any key in CLUSTER_CREDENTIALS_KEYS "
            "(was a key removed before the kubeconfigs were re-encrypted?)."
        ) from None


def reencrypt_all() -> int:
    """Encrypt every stored kubeconfig again with the newest key (after adding one in front);
    the older keys can then be removed. Returns how many were re-encrypted."""
    fernet, done = _fernet(), 0
    for cluster in Cluster.objects.exclude(kubeconfig_encrypted=""):
        rotated = fernet.rotate(cluster.kubeconfig_encrypted.encode()).decode()
        Cluster.objects.filter(pk=cluster.pk).update(kubeconfig_encrypted=rotated)
        done += 1
    return done


@checks.register(checks.Tags.security, deploy=True)
def credentials_keys_check(app_configs: Any, **kwargs: Any) -> list[checks.CheckMessage]:
    try:
        _fernet()
    except ImproperlyConfigured as error:
        return [checks.Error(str(error), id="claims.E001")]
    except ValueError as error:
        message = f"CLUSTER_CREDENTIALS_KEYS holds a key that is not a Fernet key: {error}"
        return [checks.Error(message, id="claims.E002")]
    return []


def _invalid(message: str) -> ValidationError:
    return ValidationError({"kubeconfig": [message]})


def parse_kubeconfig(text: str) -> Obj:
    """The kubeconfig as a dict, or ValidationError on the kubeconfig field in plain words."""
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        if where is not None:
            problem = _("This is not valid YAML (line %(line)d).") % {"line": where.line + 1}
        else:
            problem = _("This is not valid YAML.")
        raise _invalid(problem) from None
    if not isinstance(loaded, dict):
        raise _invalid(_("This is not a kubeconfig: expected a YAML mapping with contexts."))
    if not context_names(loaded):
        raise _invalid(_("This kubeconfig has no contexts."))
    return loaded


def context_names(kubeconfig: Obj) -> list[str]:
    contexts = kubeconfig.get("contexts")
    if not isinstance(contexts, list):
        return []
    return [str(c["name"]) for c in contexts if isinstance(c, dict) and c.get("name")]


def default_context(text: str) -> str:
    """The kubeconfig's current context, or its only one; "" when it cannot be told."""
    try:
        kubeconfig = parse_kubeconfig(text)
    except ValidationError:
        return ""  # save_cluster says what is wrong with it
    names = context_names(kubeconfig)
    current = kubeconfig.get("current-context")
    return current if current in names else (names[0] if len(names) == 1 else "")


def _named(kubeconfig: Obj, section: str, name: Any) -> Obj | None:
    for entry in kubeconfig.get(section) or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            value = entry.get(section[:-1])
            return value if isinstance(value, dict) else {}
    return None


def check_context(kubeconfig: Obj, context: str) -> None:
    """The context exists, names a cluster and user present, and needs nothing local."""
    names = context_names(kubeconfig)
    if context not in names:
        raise ValidationError(
            {
                "context": [
                    _("Pick one of this kubeconfig's contexts: %(names)s.")
                    % {"names": ", ".join(names)}
                ]
            }
        )
    chosen = _named(kubeconfig, "contexts", context) or {}
    cluster = _named(kubeconfig, "clusters", chosen.get("cluster"))
    user = _named(kubeconfig, "users", chosen.get("user"))
    if cluster is None or not cluster.get("server"):
        raise _invalid(
            _("Context %(context)r names cluster %(cluster)r, which has no server here.")
            % {"context": context, "cluster": chosen.get("cluster")}
        )
    if user is None:
        raise _invalid(
            _("Context %(context)r names user %(user)r, which is not here.")
            % {"context": context, "user": chosen.get("user")}
        )
    _refuse_local(cluster, user)


def _refuse_local(cluster: Obj, user: Obj) -> None:
    for entry in (cluster, user):
        for key, inline in LOCAL_REFERENCES.items():
            if entry.get(key):
                raise _invalid(
                    _("It refers to a file (%(key)s); embed it as %(inline)s instead.")
                    % {"key": key, "inline": inline}
                )
    if user.get("exec") or user.get("auth-provider"):
        raise _invalid(
            _(
                "Its user runs a credential plugin (exec or auth-provider), which would run a "
                "program on the portal's server; use a token or a client certificate, e.g. a "
                "ServiceAccount token."
            )
        )


def kubeconfig_of(cluster: Cluster) -> Obj | None:
    """The cluster's uploaded kubeconfig, decrypted (in memory only); None for others."""
    if not cluster.kubeconfig_encrypted:
        return None
    loaded = yaml.safe_load(decrypt(cluster.kubeconfig_encrypted))
    return loaded if isinstance(loaded, dict) else {}
