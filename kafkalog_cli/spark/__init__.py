"""The Spark data source and jobs (not built yet: see the Spark pipeline issue)."""
