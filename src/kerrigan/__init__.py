"""Kerrigan: hardware-in-the-loop test sessions on a lab of devkits, driven from GitHub."""

__version__ = "0.1.0"
