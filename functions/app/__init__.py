"""The deployable application: composition root and Lambda handlers."""
