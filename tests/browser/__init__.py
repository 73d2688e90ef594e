"""Browser end-to-end tests: Playwright driving Debian's Chromium against a real egs-hub."""
