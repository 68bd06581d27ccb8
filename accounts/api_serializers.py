from __future__ import annotations

from rest_framework import serializers

from accounts.models import ApiToken


class TokenObtainSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, trim_whitespace=False)
    name = serializers.CharField(
        max_length=100, required=False, default="api/auth/token", help_text="A name for the token."
    )


class ApiTokenSerializer(serializers.ModelSerializer):
    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "created_at", "last_used_at"]
        read_only_fields = fields


class NewTokenSerializer(ApiTokenSerializer):
    token = serializers.CharField(help_text="The secret: shown this once, never again.")

    class Meta(ApiTokenSerializer.Meta):
        fields = ["token", *ApiTokenSerializer.Meta.fields]
        read_only_fields = fields
