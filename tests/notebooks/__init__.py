"""The notebooks: static checks, outcome rows, rehearsal, Studio set-up, JupyterLab in a browser."""
