! mpcbox: Fortran interface to the C ABI (ISO_C_BINDING). Link with -lmpcbox_coupling.
! Arrays are pos(3,n), vel(3,n), mass(n) in double precision, positions in cell units.
module mpcbox
  use, intrinsic :: iso_c_binding
  implicit none
  integer(c_int), parameter :: MPCBOX_OK = 0

  type, bind(C) :: mpcbox_observables_t
    integer(c_int64_t) :: step
    real(c_double) :: time
    integer(c_int64_t) :: particles
    real(c_double) :: momentum(3)
    real(c_double) :: kinetic_energy
    real(c_double) :: temperature
    real(c_double) :: stress_xy_kinetic
    real(c_double) :: stress_xy_collisional
  end type

  interface
    type(c_ptr) function mpcbox_create_from_ron(ron_text) bind(C, name="mpcbox_create_from_ron")
      import :: c_ptr, c_char
      character(kind=c_char), dimension(*), intent(in) :: ron_text
    end function
    type(c_ptr) function mpcbox_create_from_file(path) bind(C, name="mpcbox_create_from_file")
      import :: c_ptr, c_char
      character(kind=c_char), dimension(*), intent(in) :: path
    end function
    subroutine mpcbox_free(s) bind(C, name="mpcbox_free")
      import :: c_ptr
      type(c_ptr), value :: s
    end subroutine
    integer(c_int) function mpcbox_step(s, n, pos, vel, mass) bind(C, name="mpcbox_step")
      import :: c_ptr, c_int, c_size_t, c_double
      type(c_ptr), value :: s
      integer(c_size_t), value :: n
      real(c_double), intent(in) :: pos(3, *)
      real(c_double), intent(inout) :: vel(3, *)
      real(c_double), intent(in) :: mass(*)
    end function
    ! Device-resident solutes (CUDA Fortran or OpenACC device arrays: pass c_devloc / c_loc of
    ! the device data): pos(3,n), vel(3,n), mass(n) in the fluid GPU's memory; stream may be
    ! c_null_ptr (the default stream).
    integer(c_int) function mpcbox_step_device(s, n, pos, vel, mass, stream) &
        bind(C, name="mpcbox_step_device")
      import :: c_ptr, c_int, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t), value :: n
      type(c_ptr), value :: pos, vel, mass, stream
    end function
    ! Memory for solute arrays: page-locked where a CUDA GPU is usable (a fluid on GPUs then
    ! copies the arrays by DMA, without a staging copy), ordinary memory otherwise. Map it with
    ! c_f_pointer; give it back with mpcbox_host_free.
    type(c_ptr) function mpcbox_host_alloc(bytes) bind(C, name="mpcbox_host_alloc")
      import :: c_ptr, c_size_t
      integer(c_size_t), value :: bytes
    end function
    subroutine mpcbox_host_free(p) bind(C, name="mpcbox_host_free")
      import :: c_ptr
      type(c_ptr), value :: p
    end subroutine
    integer(c_int) function mpcbox_step_fluid(s, steps) bind(C, name="mpcbox_step_fluid")
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: s
      integer(c_int64_t), value :: steps
    end function
    integer(c_int) function mpcbox_observables(s, out) bind(C, name="mpcbox_observables")
      import :: c_ptr, c_int, mpcbox_observables_t
      type(c_ptr), value :: s
      type(mpcbox_observables_t), intent(out) :: out
    end function
    integer(c_int) function mpcbox_last_collision(s, out) bind(C, name="mpcbox_last_collision")
      import :: c_ptr, c_int, mpcbox_observables_t
      type(c_ptr), value :: s
      type(mpcbox_observables_t), intent(out) :: out
    end function
    integer(c_int) function mpcbox_checkpoint_save(s, path) bind(C, name="mpcbox_checkpoint_save")
      import :: c_ptr, c_int, c_char
      type(c_ptr), value :: s
      character(kind=c_char), dimension(*), intent(in) :: path
    end function
    integer(c_int) function mpcbox_checkpoint_overwrite(s, path) bind(C, name="mpcbox_checkpoint_overwrite")
      import :: c_ptr, c_int, c_char
      type(c_ptr), value :: s
      character(kind=c_char), dimension(*), intent(in) :: path
    end function
    type(c_ptr) function mpcbox_last_error() bind(C, name="mpcbox_last_error")
      import :: c_ptr
    end function
  end interface

contains

  !> The last error message as a Fortran string.
  function mpcbox_error_message() result(msg)
    character(len=:), allocatable :: msg
    character(kind=c_char), pointer :: chars(:)
    integer :: n
    interface
      integer(c_size_t) function c_strlen(p) bind(C, name="strlen")
        import :: c_ptr, c_size_t
        type(c_ptr), value :: p
      end function
    end interface
    type(c_ptr) :: p
    p = mpcbox_last_error()
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: msg)
    msg = transfer(chars(1:n), msg)
  end function
end module mpcbox
