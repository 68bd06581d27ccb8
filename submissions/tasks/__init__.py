"""Tasks and their data: dataset versions and the workers' dataset cache, the files a task
publishes, the task pages' text."""
