"""The participants' web layer: form views, REST API views and serializers, URLs. Thin: each view
validates its input, calls one service or selector, and renders or serializes the result."""
