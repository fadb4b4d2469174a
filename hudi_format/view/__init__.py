"""File names, file groups, file slices and the file-system view as of an instant."""

from .file_names import BaseFileName, LogFileName, parse_base_file_name, parse_log_file_name
from .file_slice import FileGroup, FileSlice
from .fs_view import FileSystemView

__all__ = ["BaseFileName", "LogFileName", "parse_base_file_name", "parse_log_file_name",
           "FileGroup", "FileSlice", "FileSystemView"]
