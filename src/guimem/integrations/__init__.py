"""guimem memory inside other agent frameworks' loops (BrowserGym, AgentLab-style agents)."""
