"""What Hermes, the host, is and does: what it does (``host``, ``releases``), its config, its
ContextEngine base, its redactor, its prompt-cache TTL and the lineage of its sessions. The only
package that names a Hermes release. Imports nothing of the plugin but ``common``."""
