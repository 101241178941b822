"""Environments: MiniWoB++ in headless Chromium, Android over ADB, and the `Env` protocol they share."""
