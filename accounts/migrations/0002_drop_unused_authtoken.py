"""rest_framework.authtoken was installed but never used (our tokens are accounts.ApiToken).

Databases migrated while it was installed hold its empty ``authtoken_token`` table, its migration
records, content types and permissions. Drop them if present, so that removing the app leaves
nothing behind; a database created after the removal has none of them and is left as it is.
"""

from django.db import migrations

AUTHTOKEN_TABLE = "authtoken_token"


def drop_authtoken(apps, schema_editor):
    connection = schema_editor.connection
    if AUTHTOKEN_TABLE in connection.introspection.table_names():
        schema_editor.execute(f"DROP TABLE {schema_editor.quote_name(AUTHTOKEN_TABLE)}")
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM django_migrations WHERE app = %s", ["authtoken"])
    # Deleting the content types deletes their permissions too (and admin log entries keep their
    # text with no content type).
    apps.get_model("contenttypes", "ContentType").objects.filter(app_label="authtoken").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_api_tokens"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("admin", "0003_logentry_add_action_flag_choices"),
    ]

    operations = [migrations.RunPython(drop_authtoken, migrations.RunPython.noop)]
