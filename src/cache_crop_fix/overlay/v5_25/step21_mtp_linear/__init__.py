"""Step 17 (fork): MTP layers of linear attention build, run and roll back exactly."""
