"""``oep``: the participant's command-line client for the portal's REST API.

Imports nothing from Django: it runs on a participant's machine with ``requests`` for the API and,
for ``oep check`` only, onnx + onnxruntime + numpy (the server's own inspection and runner code).
"""
