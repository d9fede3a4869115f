"""Step 22 (fork): MTP layers of linear attention build, run and roll back exactly."""
