"""Django's upload handlers, keeping the name the client gave: Django cuts an uploaded file's name
to 255 characters without a word, and Courier says when it cut one (botapp/models/uploads.py).
Each file they return carries `given_name`, the client's name before Django's cut."""

from django.core.files.uploadhandler import MemoryFileUploadHandler, TemporaryFileUploadHandler


class _GivenName:
    def new_file(self, field_name, file_name, *args, **kwargs):
        self.given_name = file_name
        return super().new_file(field_name, file_name, *args, **kwargs)

    def file_complete(self, file_size):
        uploaded = super().file_complete(file_size)
        if uploaded is not None:
            uploaded.given_name = self.given_name
        return uploaded


class GivenNameMemoryUploadHandler(_GivenName, MemoryFileUploadHandler):
    """Django's handler for small files, in memory."""


class GivenNameTemporaryUploadHandler(_GivenName, TemporaryFileUploadHandler):
    """Django's handler for larger files, in a temporary file."""
