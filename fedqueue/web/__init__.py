"""The HTTP edge: Starlette routes that translate requests to store and engine calls."""
