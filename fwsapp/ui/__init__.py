"""The app layer's glue, by role: `resources` (the store, models and jobs, one per process), `queries`
(cached query results, keyed by the store's revision) and `widgets` (inputs and panels several pages share).
Pages import these and draw; they hold no SQL and no model code.
"""
