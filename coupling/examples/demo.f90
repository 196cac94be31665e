! A minimal MD-side loop in Fortran: 27 solutes in an mpcbox solvent.
program demo
  use mpcbox
  use, intrinsic :: iso_c_binding
  implicit none
  type(c_ptr) :: s
  integer, parameter :: n = 27
  real(c_double) :: pos(3, n), mass(n), p0, p1
  real(c_double), pointer :: vel(:, :)
  type(c_ptr) :: vel_memory
  type(mpcbox_observables_t) :: obs
  integer :: i, step

  s = mpcbox_create_from_ron("(cells: (6, 6, 6), particles_per_cell: 10, time_step: 0.1, " // &
      "collision: Srd(angle_deg: 130.0), seed: 9, steps: 10, device: Cpu)" // c_null_char)
  if (.not. c_associated(s)) then
    print *, "create failed: ", mpcbox_error_message()
    stop 1
  end if
  ! the velocities in memory from mpcbox (page-locked where a GPU is usable, so that they
  ! cross PCIe without a staging copy; any Fortran array works as well)
  vel_memory = mpcbox_host_alloc(int(8 * 3 * n, c_size_t))
  if (.not. c_associated(vel_memory)) stop 1
  call c_f_pointer(vel_memory, vel, [3, n])
  do i = 1, n
    pos(:, i) = [modulo(i, 3) * 2.0d0 + 0.5d0, modulo(i / 3, 3) * 2.0d0 + 0.5d0, (i / 9) * 2.0d0 + 0.5d0]
    vel(:, i) = [0.5d0, -0.25d0, 0.0d0]
    mass(i) = 3.0d0
  end do
  if (mpcbox_observables(s, obs) /= MPCBOX_OK) stop 1
  p0 = obs%momentum(1) + sum(mass * vel(1, :))
  do step = 1, 10
    if (mpcbox_step(s, int(n, c_size_t), pos, vel, mass) /= MPCBOX_OK) then
      print *, "step failed: ", mpcbox_error_message()
      stop 1
    end if
  end do
  if (mpcbox_observables(s, obs) /= MPCBOX_OK) stop 1
  p1 = obs%momentum(1) + sum(mass * vel(1, :))
  print '(a, i0, a, es12.4)', "steps ", obs%step, ", momentum change ", abs(p1 - p0)
  if (abs(p1 - p0) > 1d-9) stop 1
  mass(1) = -1.0d0
  if (mpcbox_step(s, int(n, c_size_t), pos, vel, mass) == MPCBOX_OK) stop 1
  print *, "negative mass refused: ", mpcbox_error_message()
  call mpcbox_free(s)
  call mpcbox_host_free(vel_memory)
  print *, "fortran ok"
end program demo
