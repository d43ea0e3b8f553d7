"""Results: FWS, the report, the paper's tables, export, and what a run is called beside others."""
