"""What Hermes, the host, is and does: its config, its ContextEngine base and the
lineage of its sessions. Imports nothing of the plugin but ``common``."""
