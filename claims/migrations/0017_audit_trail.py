"""The audit trail records every action (who, what, from where, before/after, the applied
manifest's hash, the allocation, the run's result) and is append-only: a trigger refuses
UPDATE, DELETE and TRUNCATE of its table. Users it names are referenced without a database
constraint, so deleting a user touches no audit row."""

import django.core.serializers.json
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

# Existing rows: who acted, by name (the row must say it after the user is gone), and the
# rows that changed no state are notes.
FILL_IN = """
UPDATE claims_auditevent AS e SET actor_username = u.username
  FROM auth_user AS u WHERE e.actor_id = u.id;
UPDATE claims_auditevent SET action = 'note' WHERE from_state = to_state;
"""

# Back to the old shape (the trigger is gone by then): rows about no object get id 0, and
# users deleted since are no longer named (the old foreign keys need them to exist).
FIT_OLD_SHAPE = """
UPDATE claims_auditevent SET object_id = 0 WHERE object_id IS NULL;
UPDATE claims_auditevent SET actor_id = NULL
  WHERE actor_id IS NOT NULL AND actor_id NOT IN (SELECT id FROM auth_user);
UPDATE claims_auditevent SET owner_id = NULL
  WHERE owner_id IS NOT NULL AND owner_id NOT IN (SELECT id FROM auth_user);
"""

# TRUNCATE is allowed only where the session says portal.audit_truncate = 'on': the test
# suite's flush between tests does (tests/fixtures/portal.py); the portal never does.
APPEND_ONLY = """
CREATE FUNCTION claims_auditevent_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'TRUNCATE' AND current_setting('portal.audit_truncate', true) = 'on' THEN
    RETURN NULL;
  END IF;
  RAISE EXCEPTION 'the audit trail is append-only: % refused', TG_OP
    USING ERRCODE = 'insufficient_privilege';
END;
$$;
CREATE TRIGGER claims_auditevent_no_change BEFORE UPDATE OR DELETE ON claims_auditevent
  FOR EACH ROW EXECUTE FUNCTION claims_auditevent_append_only();
CREATE TRIGGER claims_auditevent_no_truncate BEFORE TRUNCATE ON claims_auditevent
  FOR EACH STATEMENT EXECUTE FUNCTION claims_auditevent_append_only();
"""

CHANGEABLE_AGAIN = """
DROP TRIGGER claims_auditevent_no_truncate ON claims_auditevent;
DROP TRIGGER claims_auditevent_no_change ON claims_auditevent;
DROP FUNCTION claims_auditevent_append_only();
"""

# The no-server demo (`make run` without DATABASE_URL) runs on SQLite: the same refusal there.
SQLITE_APPEND_ONLY = [
    f"""CREATE TRIGGER claims_auditevent_no_{op.lower()} BEFORE {op} ON claims_auditevent
  BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only: {op} refused'); END;"""
    for op in ("UPDATE", "DELETE")
]
SQLITE_CHANGEABLE_AGAIN = [
    f"DROP TRIGGER claims_auditevent_no_{op};" for op in ("update", "delete")
]


def _run(statements: dict[str, str | list[str]]):  # type: ignore[no-untyped-def]
    """Run the statements written for this database (PostgreSQL or SQLite)."""

    def run(apps, schema_editor) -> None:  # type: ignore[no-untyped-def]
        chosen = statements.get(schema_editor.connection.vendor, [])
        for statement in [chosen] if isinstance(chosen, str) else chosen:
            schema_editor.execute(statement, params=None)  # no placeholders: % is SQL

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("claims", "0016_expiry_notifications"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="action",
            field=models.CharField(
                choices=[
                    ("state_change", "state change"),
                    ("note", "note"),
                    ("login", "login"),
                    ("login_failed", "login failed"),
                    ("locked_out", "locked out"),
                    ("logout", "logout"),
                    ("token_created", "token created"),
                    ("token_revoked", "token revoked"),
                    ("kubeconfig_issued", "kubeconfig issued"),
                    ("extension_asked", "extension asked"),
                    ("created", "created"),
                    ("changed", "changed"),
                    ("deleted", "deleted"),
                ],
                default="state_change",
                max_length=30,
            ),
        ),
        migrations.AddField(
            model_name="auditevent",
            name="actor_username",
            field=models.CharField(blank=True, max_length=150),
        ),
        migrations.AddField(
            model_name="auditevent",
            name="after",
            field=models.JSONField(
                blank=True, encoder=django.core.serializers.json.DjangoJSONEncoder, null=True
            ),
        ),
        migrations.AddField(
            model_name="auditevent",
            name="allocation",
            field=models.JSONField(
                blank=True, encoder=django.core.serializers.json.DjangoJSONEncoder, null=True
            ),
        ),
        migrations.AddField(
            model_name="auditevent",
            name="before",
            field=models.JSONField(
                blank=True, encoder=django.core.serializers.json.DjangoJSONEncoder, null=True
            ),
        ),
        migrations.AddField(
            model_name="auditevent",
            name="channel",
            field=models.CharField(
                choices=[("web", "web"), ("api", "API"), ("admin", "admin"), ("system", "system")],
                default="system",
                max_length=10,
            ),
        ),
        migrations.AddField(
            model_name="auditevent",
            name="client_ip",
            field=models.GenericIPAddressField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="auditevent",
            name="manifest_sha256",
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AddField(
            model_name="auditevent",
            name="result",
            field=models.JSONField(
                blank=True, encoder=django.core.serializers.json.DjangoJSONEncoder, null=True
            ),
        ),
        migrations.AddField(
            model_name="auditevent",
            name="user_agent",
            field=models.CharField(blank=True, max_length=300),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="actor",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="object_id",
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="object_kind",
            field=models.CharField(
                choices=[
                    ("namespace_request", "namespace request"),
                    ("claim_request", "claim request"),
                    ("verification_run", "verification run"),
                    ("user", "user"),
                    ("api_token", "API token"),
                    ("cluster", "cluster"),
                    ("team", "team"),
                    ("team_membership", "team membership"),
                    ("team_quota", "team quota"),
                    ("approval_rule", "approval rule"),
                    ("team_webhook", "team webhook"),
                ],
                max_length=30,
            ),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="owner",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="to_state",
            field=models.CharField(blank=True, max_length=20),
        ),
        migrations.AddIndex(
            model_name="auditevent",
            index=models.Index(fields=["action", "created"], name="event_action_oldest"),
        ),
        migrations.AddIndex(
            model_name="auditevent",
            index=models.Index(fields=["actor_username", "created"], name="event_actor_oldest"),
        ),
        migrations.AddIndex(
            model_name="auditevent",
            index=models.Index(fields=["object_name"], name="event_object_name"),
        ),
        migrations.RunSQL(FILL_IN, FIT_OLD_SHAPE),
        migrations.RunPython(
            _run({"postgresql": APPEND_ONLY, "sqlite": SQLITE_APPEND_ONLY}),
            _run({"postgresql": CHANGEABLE_AGAIN, "sqlite": SQLITE_CHANGEABLE_AGAIN}),
        ),
    ]
