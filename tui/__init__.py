"""ktui's Textual application and command line, on top of core.service.KnowledgeService."""
