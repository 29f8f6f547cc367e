from scheduler.management.jobcommand import JobCommand


class Command(JobCommand):
    job_name = "reset_token_counts"
