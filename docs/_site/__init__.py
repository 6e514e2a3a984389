"""The documentation site's build helpers (``mkdocs.yml``): not part of the package."""
