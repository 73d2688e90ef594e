"""Tornado handlers of the REST API and the pages."""
