"""fwsapp: what does an LLM watermark do to the medical facts in a text?"""
