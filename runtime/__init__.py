"""The per-process runtime (store, writer, Gateway client, sender) and its ingest policy."""
