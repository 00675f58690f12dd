"""Sift: clean, bounded, LLM-ready web content for AI agents, fetched safely."""
