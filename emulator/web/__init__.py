"""The live status page: aiohttp app, JSON API, push stream, page controls."""
