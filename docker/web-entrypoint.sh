#!/bin/sh
# Web image entrypoint: run the given command (gunicorn by default, `python manage.py migrate`
# for the one-shot migrate service) with the project on the path.
set -eu
cd /app
exec "$@"
