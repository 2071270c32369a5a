"""``bridge dashboard``: a live web view of the fleet, served on 127.0.0.1.

It reads only what already exists — the local gateway's socket, a tap queue on
``bridge.msg`` and the ``bridge.dlq`` operations — so it can never take a message from an
inbox. Needs the ``dashboard`` extra (Starlette and uvicorn).
"""
