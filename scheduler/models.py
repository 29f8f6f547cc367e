from django.db import models

from botapp import clock


class JobRun(models.Model):
    """One run of a background job: what it did, for the jobs dashboard."""

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        OK = "ok", "OK"
        FAILED = "failed", "Failed"

    job = models.CharField(max_length=64)
    trigger = models.CharField(max_length=16, default="beat", help_text="beat, command, admin or sandbox")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    started_at = models.DateTimeField(default=clock.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    processed = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    detail = models.CharField(max_length=255, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at"]
        indexes = [models.Index(fields=["job", "-started_at"], name="jobrun_job_latest")]

    def __str__(self) -> str:
        return f"{self.job} at {self.started_at:%Y-%m-%d %H:%M:%S} ({self.status})"

    @property
    def duration(self):
        return self.finished_at - self.started_at if self.finished_at else None


class BackgroundJob(JobRun):
    """The jobs dashboard's place in the admin (no table of its own)."""

    class Meta:
        proxy = True
        verbose_name = "background job"
        verbose_name_plural = "background jobs"
        # Seeing the jobs page is view_jobrun; starting a job outside its schedule is this.
        permissions = [("run_backgroundjob", "Can run a background job now")]
