"""Step 21 (fork): MTP layers of linear attention build, run and roll back exactly."""
